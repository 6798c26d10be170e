// Outputs keep their context (docs/design.md §6.2): an .npz carries the run's tokens and
// meta, a batch's tokens stand at the top level, JSON's non-finite numbers can be null,
// and a model without --layer computes every layer.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/io/npz.hpp"
#include "cli_util.hpp"
#include "scratch_dir.hpp"

using attn_test::run_attn;
using attn_test::slurp;
using nlohmann::json;

namespace {

std::vector<std::string> member_names(const std::string& path) {
    std::vector<std::string> names;
    for (const auto& a : attn::io::read_npz(slurp(path), path)) names.push_back(a.name);
    return names;
}

}  // namespace

TEST_CASE("an .npz output keeps the run's tokens and meta beside its stages, readable without pickle") {
    attn_test::scratch_dir dir;
    const std::string npz = dir.path + "/all.npz";
    const std::string args = "compute --mask causal data/notebook.npz --tokens 'my name is Aj'";
    REQUIRE(run_attn(args + " -o '" + npz + "'").code == 0);
    const auto held = run_attn(args + " --compact");
    REQUIRE(held.code == 0);
    const json doc = json::parse(held.out);
    const attn::io::npz_context c = attn::io::read_npz_context(slurp(npz), npz);
    CHECK(c.tokens.shape == attn::shape_t{4});
    CHECK(c.tokens.values == std::vector<std::string>{"my", "name", "is", "Aj"});
    CHECK(json::parse(c.meta) == doc["meta"]);
    // The stages are read as before: the context is not an array of numbers.
    CHECK(member_names(npz) == std::vector<std::string>{"scores", "weights", "output"});
    // Its members come after the stages, in np.savez's layout (tests/io/test_npy.cpp checks the
    // unicode arrays against np.save's bytes).
    const std::string bytes = slurp(npz);
    CHECK(bytes.find("tokens.npy") > bytes.find("output.npy"));
    CHECK(bytes.find("meta.npy") > bytes.find("tokens.npy"));
}

TEST_CASE("plot and view of a saved .npz label their axes with its tokens, as of the same run's JSON") {
    attn_test::scratch_dir dir;
    const std::string args = "compute data/llama-tiny --text 'Hello world' --dump weights,scores,mask,head_stats";
    REQUIRE(run_attn(args + " -o '" + dir.path + "/run.npz'").code == 0);
    REQUIRE(run_attn(args + " -o '" + dir.path + "/run.json'").code == 0);
    for (const char* cmd : {"plot", "view"}) {
        CAPTURE(cmd);
        const std::string ext = std::string(cmd) == "plot" ? ".png" : ".html";
        // plot draws one layer (--layer last, as the user ran it); the view shows them all.
        const std::string layer = ext == ".png" ? " --layer last" : "";
        const auto a = run_attn(std::string(cmd) + " '" + dir.path + "/run.npz'" + layer + " -o '" + dir.path + "/a" + ext + "'");
        const auto b = run_attn(std::string(cmd) + " '" + dir.path + "/run.json'" + layer + " -o '" + dir.path + "/b" + ext + "'");
        REQUIRE_MESSAGE(a.code == 0, a.err);
        REQUIRE_MESSAGE(b.code == 0, b.err);
        const std::string page = slurp(dir.path + "/a" + ext), want = slurp(dir.path + "/b" + ext);
        if (ext == ".png") {
            CHECK(page == want);  // the same labels and cells
            continue;
        }
        // The page's data labels the axes as the JSON run's does (its numbers differ in the
        // last digits: the .npz keeps float32 exactly, JSON's shortest text reads back as float64).
        const auto labels = [](const std::string& html) {
            const std::size_t at = html.find("\"tokens\":[");
            return at == std::string::npos ? std::string() : html.substr(at, html.find(']', at) - at + 1);
        };
        CHECK(labels(page) == "\"tokens\":[\"\\u003c|begin_of_text|>\",\"H\",\"el\",\"lo\",\" w\",\"or\",\"ld\"]");
        CHECK(labels(page) == labels(want));
    }
}

TEST_CASE("a batch whose items are labelled differently gives one list of tokens per item at the top level") {
    attn_test::scratch_dir dir;
    const std::string args = "compute data/llama-tiny --text 'Hello world' --text Hi --dump weights";
    const auto r = run_attn(args + " --compact");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const json doc = json::parse(r.out);
    REQUIRE(doc["tokens"].is_array());
    REQUIRE(doc["tokens"].size() == 2);
    // Each item's labels as attn tokenize gives them, the shorter right-padded with "".
    const json hello = json::parse(run_attn("tokenize --tokenizer data/llama-tiny 'Hello world' --format json").out);
    const json hi = json::parse(run_attn("tokenize --tokenizer data/llama-tiny Hi --format json").out);
    const auto tokens = [](const json& j) { return (j.is_array() ? j[0] : j)["labels"].get<std::vector<std::string>>(); };
    std::vector<std::string> second = tokens(hi);
    second.resize(tokens(hello).size());
    CHECK(doc["tokens"][0].get<std::vector<std::string>>() == tokens(hello));
    CHECK(doc["tokens"][1].get<std::vector<std::string>>() == second);
    // The .npz holds them as (B, T); attn plot and view read them back.
    REQUIRE(run_attn(args + " -o '" + dir.path + "/b.npz'").code == 0);
    const attn::io::npz_context c = attn::io::read_npz_context(slurp(dir.path + "/b.npz"), "b.npz");
    CHECK(c.tokens.shape == attn::shape_t{2, tokens(hello).size()});
    CHECK(run_attn("view '" + dir.path + "/b.npz' -o '" + dir.path + "/b.html'").code == 0);
    // One sequence, or items labelled alike, keep one flat list.
    const json one = json::parse(run_attn("compute data/llama-tiny --text Hi --dump weights --compact").out);
    CHECK(one["tokens"].get<std::vector<std::string>>() == tokens(hi));
}

TEST_CASE("--json-nonfinite null writes null where the default writes \"-Infinity\", for jq and strict parsers") {
    const std::string args = "compute --mask causal data/notebook.npz --dump scores,weights";
    const auto strings = run_attn(args + " --compact");
    const auto nulls = run_attn(args + " --compact --json-nonfinite null");
    const auto lines = run_attn(args + " --format jsonl --json-nonfinite null");
    REQUIRE(strings.code == 0);
    REQUIRE(nulls.code == 0);
    REQUIRE(lines.code == 0);
    CHECK(nulls.out == lines.out);
    const json s = json::parse(strings.out), n = json::parse(nulls.out);
    std::size_t replaced = 0;
    for (std::size_t i = 0; i < 4; ++i)
        for (std::size_t j = 0; j < 4; ++j) {
            const json& a = s["scores"][i][j];
            const json& b = n["scores"][i][j];
            if (a.is_string()) {
                CHECK(a == "-Infinity");
                CHECK(b.is_null());
                ++replaced;
            } else {
                CHECK(a == b);
            }
        }
    CHECK(replaced == 6);  // the causal upper triangle
    CHECK(s["weights"] == n["weights"]);
    CHECK(run_attn(args + " --json-nonfinite string --compact").out == strings.out);
    const auto bad = run_attn(args + " --json-nonfinite nan");
    CHECK(bad.code == 2);
    CHECK(bad.err == "attn: error: --json-nonfinite: unknown value nan (expected one of string, null)\n");
}

TEST_CASE("a model directory or checkpoint without --layer computes every layer, as output_attentions does") {
    attn_test::scratch_dir dir;
    for (const std::string model : {"data/llama-tiny", "data/gpt2-tiny/model.safetensors"}) {
        CAPTURE(model);
        const std::string given = "compute " + model + " --ids 1,2,3 --dump weights --compact";
        const auto all = run_attn(given + " --layer all");
        const auto plain = run_attn(given);
        REQUIRE_MESSAGE(all.code == 0, all.err);
        CHECK(plain.code == 0);
        CHECK(plain.err.empty());
        CHECK(plain.out == all.out);
        CHECK(json::parse(plain.out)["meta"]["model"]["layer"] == "all");
    }
    const auto view = run_attn("view data/llama-tiny --ids 1,2,3 -o '" + dir.path + "/v.html'");
    const auto view_all = run_attn("view data/llama-tiny --ids 1,2,3 --layer all -o '" + dir.path + "/w.html'");
    CHECK(view.code == 0);
    REQUIRE(view_all.code == 0);
    CHECK(slurp(dir.path + "/v.html") == slurp(dir.path + "/w.html"));
    // A safetensors file of attention inputs is still arrays, not a model.
    const auto qkv = run_attn("compute tests/fixtures/safetensors/qkv.safetensors --dump weights --compact");
    CHECK_MESSAGE(qkv.code == 0, qkv.err);
}
