// attn against torch.nn.MultiheadAttention (PyTorch 1.13, float64): the fixtures under
// tests/fixtures/torch/ were made by scripts/make_torch_fixtures.py. Each <case>.npz holds
// the inputs under attn's bundle names and what MHA returned (expected_output,
// expected_weights); cases.json gives the attn options of each case. The real binary runs
// `attn compute <case>.npz <options> --dtype float64 --dump output,weights` and both
// stages must match to 1e-10 absolute: the same float64 arithmetic up to summation order,
// so observed differences are ~1e-15.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "scratch_dir.hpp"
#include "attn/io/npz.hpp"
#include "attn/tensor.hpp"
#include "array_compare.hpp"
#include "cli_util.hpp"
#include "npz_members.hpp"

namespace {

using nlohmann::json;
using attn_test::comparison;
using attn_test::compare_arrays;

std::string torch_fixture_dir() { return std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/torch"; }

std::string quoted(const std::string& s) { return "'" + s + "'"; }


using attn_test::find_array;

json torch_cases() {
    return json::parse(attn_test::slurp(torch_fixture_dir() + "/cases.json")).at("cases");
}

}  // namespace

TEST_CASE("torch fixtures: attn matches nn.MultiheadAttention on every case of cases.json, with either kernel") {
    const json cases = torch_cases();
    REQUIRE(cases.size() >= 8);
    const attn_test::scratch_dir scratch;
    const std::string tmp = scratch.path + "/torch.npz";
    std::size_t cases_run = 0;
    for (const std::string kernel : {"fast", "reference"})
    for (const json& tc : cases) {
        const std::string name = tc.at("name").get<std::string>();
        INFO("case " << name << ": " << tc.value("description", "") << ", --kernel " << kernel);
        const std::string fixture = torch_fixture_dir() + "/" + name + ".npz";
        std::string args = "compute " + quoted(fixture);
        for (const json& opt : tc.at("options")) args += " " + quoted(opt.get<std::string>());
        args += " --kernel " + kernel + " --dtype float64 --dump output,weights --format npz -o " + quoted(tmp);
        INFO("attn " << args);
        std::remove(tmp.c_str());
        const auto r = attn_test::run_attn(args);
        CHECK_MESSAGE(r.code == 0, "exit code " << r.code << ": " << r.err);
        if (r.code != 0) continue;
        const auto got = attn::io::read_npz(attn_test::slurp(tmp), tmp);
        const auto want = attn::io::read_npz(attn_test::slurp(fixture), fixture);
        for (const std::string stage : {"output", "weights"}) {
            INFO("stage " << stage);
            const attn::array* a = find_array(got, stage);
            const attn::array* e = find_array(want, "expected_" + stage);
            REQUIRE_MESSAGE(e != nullptr, "fixture has no expected_" << stage);
            CHECK_MESSAGE(a != nullptr, "stage missing from attn's npz");
            if (a == nullptr) continue;
            CHECK(a->type == attn::dtype::f8);  // --dtype float64 must be honoured
            const comparison c = compare_arrays(*a, *e, 1e-10, 0.0);
            CHECK_MESSAGE(c.ok, c.summary);
        }
        ++cases_run;
    }
    std::remove(tmp.c_str());
    CHECK(cases_run == 2 * cases.size());
}
