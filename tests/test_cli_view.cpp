// attn view's refusals (issue 16): one line, exit 1 for data, 2 for options, no partial page.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "cli_util.hpp"
#include "scratch_dir.hpp"

TEST_CASE("view refusals: no Tq×Tk stage, over --max-bytes, options that do not apply, a non-HTML -o") {
    attn_test::scratch_dir dir;
    const std::string d = dir.path;
    auto r = attn_test::run_attn("compute data/notebook.npz --dump output,lse --format npz -o '" + d + "/o.npz'");
    REQUIRE(r.code == 0);
    r = attn_test::run_attn("view '" + d + "/o.npz' -o '" + d + "/v.html'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + d + "/o.npz: no Tq×Tk stage to view (expected weights, scores, scaled or qk; found output, lse)\n");
    CHECK(!std::filesystem::exists(d + "/v.html"));

    // 100 tokens: the inputs are 100 × 4 float32 each, the page 2 stages × 100² values × 2 bytes.
    r = attn_test::run_attn("generate --len 100 --dk 4 --dv 4 --seed 1 -o '" + d + "/g.npz'");
    REQUIRE(r.code == 0);
    r = attn_test::run_attn("view '" + d + "/g.npz' --max-bytes 20K -o '" + d + "/v.html'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + d + "/g.npz: view: array too large for --max-bytes (expected at most 20480 bytes, got 40000)\n");
    CHECK(!std::filesystem::exists(d + "/v.html"));

    r = attn_test::run_attn("compute data/notebook.npz --format npz -o '" + d + "/w.npz'");
    REQUIRE(r.code == 0);
    r = attn_test::run_attn("view '" + d + "/w.npz' --mask causal -o '" + d + "/v.html'");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --mask: does not apply to attn output, which is already computed (expected a compute input, got " +
                       d + "/w.npz)\n");
    r = attn_test::run_attn("view '" + d + "/w.npz' -o '" + d + "/v.png'");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: -o: a view is an HTML page (expected a .html file, got '.png')\n");
    r = attn_test::run_attn("view '" + d + "/w.npz' -o '" + d + "/v.html'");
    CHECK_MESSAGE(r.code == 0, r.err);
    CHECK(attn_test::slurp(d + "/v.html").rfind("<!DOCTYPE html>", 0) == 0);
}
