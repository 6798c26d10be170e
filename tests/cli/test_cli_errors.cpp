// Parse errors a new user makes: one `attn: error:` line that says what to type, exit 2.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "cli_util.hpp"

using attn_test::run_attn;

TEST_CASE("typos in options, commands and values get the nearest spelling, exit 2") {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"compute --maks causal data/x.npy", "unknown option --maks (did you mean --mask?)"},
        {"compute --dmup=weights data/x.npy", "unknown option --dmup (did you mean --dump?)"},
        {"compute --zzzzzzz data/x.npy", "unknown option --zzzzzzz (see attn compute --help)"},
        {"inspect --nope data/x.npy", "unknown option --nope (see attn inspect --help)"},
        {"data/x.npy",
         "missing command: did you mean attn compute data/x.npy? (commands: compute, generate, posenc, inspect, "
         "compare, plot, rope, rollout, view, tokenize; see attn --help)"},
        {"comptue data/x.npy", "unknown command comptue (did you mean compute?)"},
        {"frobnicate", "unknown command frobnicate (commands: compute, generate, posenc, inspect, compare, plot, rope, rollout, view, tokenize; see "
                       "attn --help)"},
        {"", "a command is required (commands: compute, generate, posenc, inspect, compare, plot, rope, rollout, view, tokenize; see attn --help)"},
        {"compute --mask causl data/x.npy",
         "--mask: unknown value causl (expected one of none, causal, padding; did you mean causal?)"},
        {"compute --heads abc data/x.npy", "--heads: not a whole number in range (expected 1 to 1048576, got 'abc')"},
        {"compare data/x.npy data/x.npy --rtol ''", "--rtol: not a number in range (expected a number ≥ 0, got '')"},
        // The options CLI11 could only say "Could not convert" about.
        {"posenc --len 3 --dim 4 --style concat --base abc", "--base: not a number (expected a number, got 'abc')"},
        {"compute data/x.npy --heads", "--heads: a value is required (see attn compute --help)"},
        {"compare data/x.npy", "attn compare: B is required (see attn compare --help)"},
        // The option a stray value followed is the one named, whatever order CLI11 lists them in.
        {"generate --len 2 --dk 2 --std 1e308", "unknown option --std (did you mean --seed?)"},
        // No 300-digit numbers (CLI11 quotes DBL_MAX in full), no "0.000000".
        {"compare data/x.npy data/x.npy --atol -1", "--atol: not a number in range (expected a number ≥ 0, got -1)"},
        {"compare data/x.npy data/x.npy --rtol nan", "--rtol: not a finite number (expected a finite number, got nan)"},
        {"posenc --len 3 --dim 4 --style concat --base 0", "--base: not a number > 0 (expected a number > 0, got 0)"},
        {"compute data/x.npy --posenc concat --posenc-base -2",
         "--posenc-base: not a number > 0 (expected a number > 0, got -2)"},
        {"generate --len 2 --dk 2 --seed -5", "--seed: not a whole number in range (expected a number ≥ 0, got -5)"},
    };
    for (const auto& [args, message] : cases) {
        CAPTURE(args);
        const auto r = run_attn(args);
        CHECK(r.code == 2);
        CHECK(r.out.empty());
        CHECK(r.err == "attn: error: " + message + "\n");
    }
}
