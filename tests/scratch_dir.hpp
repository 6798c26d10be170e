#pragma once
// A fresh directory for a test's files, absolute (run_attn works from the source
// directory), removed with its contents when the test ends.
#include <filesystem>
#include <string>

#include "cli_util.hpp"

namespace attn_test {

struct scratch_dir {
    std::string path = std::filesystem::absolute(temp_dir()).string();
    scratch_dir() = default;
    scratch_dir(const scratch_dir&) = delete;
    scratch_dir& operator=(const scratch_dir&) = delete;
    ~scratch_dir() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
};

}  // namespace attn_test
