#pragma once
// A test whose precondition is missing (no qemu, no AVX-512, a sanitizer's allocator) must
// be reported as skipped, never as passed.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <doctest/doctest.h>

namespace attn_test {

/// Reports the running test case as skipped for `reason`. Run alone by ctest (each test
/// case is its own ctest entry, with ATTN_TEST_SKIP_EXIT=1 and SKIP_RETURN_CODE 77:
/// tests/CMakeLists.txt), the process exits 77 and ctest lists the test as skipped; in a
/// whole-suite run (the isa suites, the qemu run, ./attn_tests by hand) it prints
/// "skipped: <reason>" and the caller returns.
inline void report_skip(const std::string& reason) {
    std::fprintf(stderr, "skipped: %s\n", reason.c_str());
    std::fflush(stderr);
    const char* exit_on_skip = std::getenv("ATTN_TEST_SKIP_EXIT");
    if (exit_on_skip && std::string(exit_on_skip) == "1") std::_Exit(77);
    MESSAGE("skipped: " << reason);
}

}  // namespace attn_test

/// Ends the current test case as skipped (attn_test::report_skip).
#define ATTN_SKIP(reason)                   \
    do {                                    \
        ::attn_test::report_skip(reason);   \
        return;                             \
    } while (0)
