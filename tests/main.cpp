#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "cli_util.hpp"

// doctest's main, and `--measure-run FD ARGS PREFIX`: one attn run measured in a fresh
// process (run_attn_measured, tests/cli_util.hpp).
int main(int argc, char** argv) {
    if (argc == 5 && std::strcmp(argv[1], "--measure-run") == 0)
        return attn_test::measure_run_main(std::atoi(argv[2]), argv[3], argv[4]);
    return doctest::Context(argc, argv).run();
}
