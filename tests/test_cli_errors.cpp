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
         "compare, plot; see attn --help)"},
        {"comptue data/x.npy", "unknown command comptue (did you mean compute?)"},
        {"frobnicate", "unknown command frobnicate (commands: compute, generate, posenc, inspect, compare, plot; see "
                       "attn --help)"},
        {"", "a command is required (commands: compute, generate, posenc, inspect, compare, plot; see attn --help)"},
        {"compute --mask causl data/x.npy",
         "--mask: unknown value causl (expected one of none, causal, padding; did you mean causal?)"},
        {"compute --heads abc data/x.npy", "--heads: not a whole number in range (expected 1 to 1048576, got abc)"},
        {"compute data/x.npy --heads", "--heads: a value is required (see attn compute --help)"},
        {"compare data/x.npy", "attn compare: B is required (see attn compare --help)"},
    };
    for (const auto& [args, message] : cases) {
        CAPTURE(args);
        const auto r = run_attn(args);
        CHECK(r.code == 2);
        CHECK(r.out.empty());
        CHECK(r.err == "attn: error: " + message + "\n");
    }
}
