#include "paths.hpp"

namespace attn_test {
const char* const binary_path = ATTN_TEST_BINARY;
const char* const source_dir = ATTN_TEST_SOURCE_DIR;
const char* const shared_dir = ATTN_TEST_SHARED_DIR;
const char* const completion_path = ATTN_TEST_COMPLETION;
}  // namespace attn_test
