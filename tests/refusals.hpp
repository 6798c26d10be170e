#pragma once
// A refused `attn compute` run, checked as every refusal is (docs/design.md §1 "Errors"):
// its exit code, its one line on stderr, nothing on stdout.
#include <doctest/doctest.h>

#include <string>

#include "cli_util.hpp"

namespace attn_test {

/// Runs `attn compute ARGS` and checks it exits with `code`, writes "attn: error: MESSAGE\n"
/// on stderr and nothing on stdout.
inline void refused(const std::string& args, int code, const std::string& message) {
    CAPTURE(args);
    const auto r = run_attn("compute " + args);
    CHECK(r.code == code);
    CHECK(r.err == "attn: error: " + message + "\n");
    CHECK(r.out.empty());
}

}  // namespace attn_test
