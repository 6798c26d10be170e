#pragma once
// Where the tests find the attn binary, the source tree, ../shared and the generated bash
// completion. The paths are compiled into paths.cpp alone (tests/CMakeLists.txt
// force-includes this header in every test file), so no other test object depends on
// where the tree is checked out: a compiler cache can share them between checkouts.
namespace attn_test {
extern const char* const binary_path;
extern const char* const source_dir;
extern const char* const shared_dir;
extern const char* const completion_path;  ///< the build's attn.bash; "" when not generated
}  // namespace attn_test

#define ATTN_BINARY ::attn_test::binary_path
#define ATTN_SOURCE_DIR ::attn_test::source_dir
#define ATTN_SHARED_DIR ::attn_test::shared_dir
#define ATTN_COMPLETION ::attn_test::completion_path
