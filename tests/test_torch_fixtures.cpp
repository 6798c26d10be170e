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

#include "attn/io/npz.hpp"
#include "attn/tensor.hpp"
#include "cli_util.hpp"

namespace {

using nlohmann::json;

std::string torch_fixture_dir() { return std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/torch"; }

std::string quoted(const std::string& s) { return "'" + s + "'"; }

/// "(1, 0, 3)": the multi-index of flat C-order position `flat` in `shape`.
std::string index_string(const attn::shape_t& shape, std::size_t flat) {
    std::vector<std::size_t> idx(shape.size());
    for (std::size_t d = shape.size(); d-- > 0;) {
        idx[d] = shape[d] == 0 ? 0 : flat % shape[d];
        flat = shape[d] == 0 ? 0 : flat / shape[d];
    }
    std::ostringstream s;
    s << "(";
    for (std::size_t d = 0; d < idx.size(); ++d) s << (d ? ", " : "") << idx[d];
    s << (idx.size() == 1 ? ",)" : ")");
    return s.str();
}

struct comparison {
    bool ok = true;
    std::string summary;  // shape, max |a-e| and where, first NaN/inf or tolerance failure
};

/// Shapes equal; NaN and ±inf agree by position and sign; finite pairs |a-e| <= atol.
comparison compare_abs(const attn::array& got, const attn::array& want, double atol) {
    comparison c;
    std::ostringstream s;
    s.precision(17);
    if (got.shape != want.shape) {
        c.ok = false;
        s << "shape " << attn::shape_string(got.shape) << " != expected " << attn::shape_string(want.shape);
        c.summary = s.str();
        return c;
    }
    double max_abs = 0.0;
    std::size_t max_at = 0, nonfinite_bad = 0, first_nonfinite = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        const double a = got.value(i), e = want.value(i);
        if (std::isnan(a) || std::isnan(e) || std::isinf(a) || std::isinf(e)) {
            const bool same = (std::isnan(a) && std::isnan(e)) || a == e;
            if (!same && nonfinite_bad++ == 0) first_nonfinite = i;
            continue;
        }
        const double d = std::fabs(a - e);
        if (d > max_abs) max_abs = d, max_at = i;
    }
    c.ok = nonfinite_bad == 0 && max_abs <= atol;
    s << "shape " << attn::shape_string(want.shape) << ", max |a-e| = " << max_abs << " (atol " << atol << ") at "
      << index_string(want.shape, max_at);
    if (want.size() > 0) s << " (got " << got.value(max_at) << ", expected " << want.value(max_at) << ")";
    if (nonfinite_bad > 0)
        s << "; " << nonfinite_bad << " NaN/inf mismatches, first at " << index_string(want.shape, first_nonfinite)
          << " (got " << got.value(first_nonfinite) << ", expected " << want.value(first_nonfinite) << ")";
    c.summary = s.str();
    return c;
}

const attn::array* find_array(const std::vector<attn::io::named_array>& arrays, const std::string& name) {
    for (const auto& a : arrays)
        if (a.name == name) return &a.value;
    return nullptr;
}

json torch_cases() {
    return json::parse(attn_test::slurp(torch_fixture_dir() + "/cases.json")).at("cases");
}

}  // namespace

TEST_CASE("torch fixtures: attn matches nn.MultiheadAttention on every case of cases.json") {
    const json cases = torch_cases();
    REQUIRE(cases.size() >= 8);
    const std::string tmp = "/tmp/attn-torch-" + std::to_string(::getpid()) + ".npz";
    std::size_t cases_run = 0;
    for (const json& tc : cases) {
        const std::string name = tc.at("name").get<std::string>();
        INFO("case " << name << ": " << tc.value("description", ""));
        const std::string fixture = torch_fixture_dir() + "/" + name + ".npz";
        std::string args = "compute " + quoted(fixture);
        for (const json& opt : tc.at("options")) args += " " + quoted(opt.get<std::string>());
        args += " --dtype float64 --dump output,weights --format npz -o " + quoted(tmp);
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
            const comparison c = compare_abs(*a, *e, 1e-10);
            CHECK_MESSAGE(c.ok, c.summary);
        }
        ++cases_run;
    }
    std::remove(tmp.c_str());
    CHECK(cases_run == cases.size());
}
