// Hybrid models (docs/design.md §6.1 "Layers without softmax attention"), through the
// binary on tests/fixtures/checkpoints/lfm2-tiny (layers conv, full_attention, conv,
// full_attention): --layer all and lists count the attention layers only, numbered as in
// the model (meta.model.layer, the CSV's layer column, the table's and the page's labels);
// --layer of another layer is a usage error naming it and its type, exit 2, nothing written.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "refusals.hpp"
#include "scratch_dir.hpp"

namespace {

using attn_test::refused;

const std::string lfm2 = "tests/fixtures/checkpoints/lfm2-tiny";
const std::string ids = " --ids 1,5,9,2";

}  // namespace

TEST_CASE("hybrid: --layer all is the attention layers in model order, labelled by their numbers") {
    using nlohmann::json;
    auto r = attn_test::run_attn("compute " + lfm2 + ids + " --layer all --dump x,weights");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    json doc = json::parse(r.out);
    CHECK(doc.at("meta").at("model").at("layer") == json{1, 3});
    CHECK(doc.at("meta").at("model").at("layers") == 4);
    CHECK(doc.at("meta").at("shapes") == json{{"x", {2, 4, 32}}, {"weights", {2, 4, 4, 4}}});
    // Without --layer, the same (every layer a model has stages for).
    r = attn_test::run_attn("compute " + lfm2 + ids + " --dump x,weights");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(json::parse(r.out).at("weights") == doc.at("weights"));
    // A list of attention layers, and one alone.
    r = attn_test::run_attn("compute " + lfm2 + ids + " --layer 3 --dump weights");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(json::parse(r.out).at("meta").at("model").at("layer") == 3);
    CHECK(json::parse(r.out).at("weights") == doc.at("weights").at(1));

    // CSV's layer column and the table's labels are the model's numbers.
    r = attn_test::run_attn("compute " + lfm2 + ids + " --layer all --dump weights --format csv");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(r.out.rfind("tensor,layer,batch,head,row,col,value\nweights,1,0,0,0,0,", 0) == 0);
    CHECK(r.out.find("\nweights,3,0,3,3,3,") != std::string::npos);
    CHECK(r.out.find("\nweights,0,") == std::string::npos);
    CHECK(r.out.find("\nweights,2,") == std::string::npos);
    r = attn_test::run_attn("compute " + lfm2 + ids + " --layer all --dump weights --format table");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(r.out.find("layer 3, head 0") != std::string::npos);
    CHECK(r.out.find("layer 0,") == std::string::npos);
    // JSON Lines: one line per attention layer, each with its number.
    r = attn_test::run_attn("compute " + lfm2 + ids + " --layer all --dump weights --format jsonl");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const std::string first = r.out.substr(0, r.out.find('\n'));
    const std::string second = r.out.substr(first.size() + 1, r.out.find('\n', first.size() + 1) - first.size() - 1);
    CHECK(json::parse(first).at("meta").at("model").at("layer") == 1);
    CHECK(json::parse(second).at("meta").at("model").at("layer") == 3);

    // attn view of the checkpoint names the attention layers; its rollout multiplies theirs.
    attn_test::scratch_dir dir;
    r = attn_test::run_attn("view " + lfm2 + ids + " -o '" + dir.path + "/v.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const std::string page = attn_test::slurp(dir.path + "/v.html");
    CHECK(page.find("\"layer_names\":[1,3]") != std::string::npos);
}

TEST_CASE("hybrid: --layer of a layer without softmax attention is refused naming it and its type, exit 2") {
    const std::string conv0 = "--layer: layer 0 is a conv layer, without softmax attention "
                              "(expected one of the attention layers 1,3, or all, got 0)";
    refused(lfm2 + ids + " --layer 0", 2, conv0);
    refused(lfm2 + ids + " --layer 2 --dump weights", 2,
            "--layer: layer 2 is a conv layer, without softmax attention (expected one of the attention layers 1,3, or all, got 2)");
    // A list is refused at its first such layer; layers beyond the model first.
    refused(lfm2 + ids + " --layer 0-3", 2, conv0);
    refused(lfm2 + ids + " --layer 1,2", 2,
            "--layer: layer 2 is a conv layer, without softmax attention (expected one of the attention layers 1,3, or all, got 2)");
    refused(lfm2 + ids + " --layer 1,4", 2, "--layer: beyond the model's layers (expected 0 to 3 or all, got 4)");
    refused(lfm2 + " --x tests/fixtures/checkpoints/lfm2-tiny/expected.npz:x_layer3 --layer 2", 2,
            "--layer: layer 2 is a conv layer, without softmax attention (expected one of the attention layers 1,3, or all, got 2)");
    // Nothing written; attn plot of the checkpoint says the same.
    attn_test::scratch_dir dir;
    auto r = attn_test::run_attn("compute " + lfm2 + ids + " --layer 0 -o '" + dir.path + "/out.json'");
    CHECK(r.code == 2);
    CHECK(!std::filesystem::exists(dir.path + "/out.json"));
    r = attn_test::run_attn("plot " + lfm2 + ids + " --layer 0 -o '" + dir.path + "/p.svg'");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: " + conv0 + "\n");
    CHECK(!std::filesystem::exists(dir.path + "/p.svg"));

    // A model of conv layers only has no stages at all: a data error, exit 1.
    auto j = nlohmann::ordered_json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + lfm2 + "/config.json"));
    j["num_hidden_layers"] = 1;
    j["layer_types"] = {"conv"};
    attn_test::spit(dir.path + "/conv.json", j.dump(2));
    refused(lfm2 + ids + " --config '" + dir.path + "/conv.json'", 1,
            lfm2 + "/model.safetensors: no layer has softmax attention, so none has stages (expected an attention layer among the 1, got none)");
}
