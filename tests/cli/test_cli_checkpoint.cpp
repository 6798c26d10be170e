// attn compute on checkpoints (docs/design.md §4.3): token labels from tokenizer.json,
// checkpoints in batches, manifests, plots and every format, and each refusal with its
// exact message and exit code (nothing partial left behind).
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "family_lists.hpp"
#include "attn/io/npz.hpp"
#include "checkpoint_cases.hpp"
#include "cli_util.hpp"
#include "refusals.hpp"
#include "io_fixtures.hpp"
#include "scratch_dir.hpp"

namespace {

using attn_test::refused;

const std::string gpt2 = "data/gpt2-tiny/model.safetensors";
const std::string llama = "data/llama-tiny/model.safetensors";
const std::string fixtures = "tests/fixtures/checkpoints/";

}  // namespace

TEST_CASE("checkpoint tokens are labelled from tokenizer.json: byte-level and WordPiece") {
    using nlohmann::json;
    const auto tokens = [](const std::string& model, const std::string& ids) {
        const auto r = attn_test::run_attn("compute data/" + model + "-tiny/model.safetensors --layer 0 --ids " + ids +
                                           " --vocab data/" + model + "-tiny/tokenizer.json --dump weights");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        return json::parse(r.out).at("tokens").get<std::vector<std::string>>();
    };
    // GPT-2's own ids (data/gpt2-tiny keeps GPT-2's first 511 entries) and
    // bytes_to_unicode stand-ins: Ġ is a space, Ċ a newline.
    CHECK(tokens("gpt2", "464,11,262,198,220,511") == std::vector<std::string>{"The", ",", " the", "\n", " ", "<|endoftext|>"});
    // Llama 3's byte-level pieces; added tokens as written.
    CHECK(tokens("llama", "510,51,383,272,198") == std::vector<std::string>{"<|begin_of_text|>", "T", "he", " c", "\n"});
    CHECK(tokens("bert", "2,158,313,3") == std::vector<std::string>{"[CLS]", "cat", "##s", "[SEP]"});
    // Without --vocab the labels are the ids.
    const auto r = attn_test::run_attn("compute " + gpt2 + " --layer 0 --ids 5,7 --dump weights");
    REQUIRE(r.code == 0);
    CHECK(json::parse(r.out).at("tokens") == json{"5", "7"});
    CHECK(json::parse(r.out).at("meta").at("model") ==
          json{{"arch", "gpt2"}, {"model_type", "gpt2"}, {"checkpoint", gpt2}, {"layer", 0}, {"layers", 2}, {"hidden_size", 32}});
}

TEST_CASE("checkpoint stages: x and x_norm, a leading layer axis with --layer all, one sequence unbatched") {
    using nlohmann::json;
    auto r = attn_test::run_attn("compute " + llama + " --layer all --ids 1,2,3 --dump x,x_norm,q,weights,output,lse");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const json shapes = json::parse(r.out).at("meta").at("shapes");
    CHECK(shapes == json{{"x", {2, 3, 32}}, {"x_norm", {2, 3, 32}}, {"q", {2, 3, 32}}, {"weights", {2, 4, 3, 3}},
                         {"output", {2, 3, 32}}, {"lse", {2, 4, 3}}});
    r = attn_test::run_attn("compute " + llama + " --layer 1 --token-ids " + fixtures + "bert-tiny/expected-padded.npz:attention_mask" +
                            " --dump weights");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(json::parse(r.out).at("meta").at("shapes") == json{{"weights", {4, 8, 8}}});
}

TEST_CASE("checkpoint layer axis: CSV has a layer column, tables label layers") {
    // One sequence: weights (L, H, T, T); CSV "weights,l,0,h,r,c,v" against the PyTorch reference.
    const std::string fixture = fixtures + "gpt2-tiny/expected.npz";
    const auto want = attn::io::read_npz(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + fixture), fixture);
    const attn::array* weights = nullptr;
    for (const auto& a : want)
        if (a.name == "weights") weights = &a.value;
    REQUIRE(weights);
    auto r = attn_test::run_attn("compute " + gpt2 + " --token-ids " + fixture + ":ids --layer all --dump weights --format csv --dtype float64");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(r.out.rfind("tensor,layer,batch,head,row,col,value\n", 0) == 0);
    const std::size_t at = r.out.find("\nweights,1,0,2,7,3,");
    REQUIRE(at != std::string::npos);
    const double v = std::stod(r.out.substr(at + 20, r.out.find('\n', at + 1) - at - 20));
    CHECK(v == doctest::Approx(weights->value(((1 * 4 + 2) * 8 + 7) * 8 + 3)).epsilon(1e-9));
    // Per-layer 0-d stats become (L,): one line per layer.
    r = attn_test::run_attn("compute " + gpt2 + " --ids 1,2 --layer all --dump stats --format csv");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(r.out.find("\nstats.dk,0,0,0,0,0,8\nstats.dk,1,0,0,0,0,8\n") != std::string::npos);
    r = attn_test::run_attn("compute " + gpt2 + " --ids 1,2 --layer all --dump weights --format table");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(r.out.find("\nlayer 1, head 3\n") != std::string::npos);
}

TEST_CASE("checkpoints work in batches, manifests, plots and every format") {
    attn_test::scratch_dir dir;
    // A manifest line names the checkpoint and its options; --config and --vocab are
    // relative to the manifest's folder, as inputs are.
    std::filesystem::create_directories(dir.path + "/m");
    std::filesystem::copy(std::string(ATTN_SOURCE_DIR) + "/data/gpt2-tiny", dir.path + "/m/gpt2");
    attn_test::spit(dir.path + "/m/jobs.jsonl",
                    "{\"input\": \"gpt2/model.safetensors\", \"layer\": \"0\", \"ids\": [464, 11], \"vocab\": \"gpt2/tokenizer.json\", \"dump\": \"weights\"}\n"
                    "{\"input\": \"gpt2/model.safetensors\", \"layer\": \"5\", \"ids\": [1]}\n");
    auto r = attn_test::run_attn("compute --manifest '" + dir.path + "/m/jobs.jsonl'");
    CHECK(r.code == 2);  // --layer 5 is a usage error, in a batch as alone
    const auto lines = r.out.substr(0, r.out.find('\n'));
    CHECK(nlohmann::json::parse(lines).at("tokens") == nlohmann::json{"The", ","});
    CHECK(r.out.find("model.safetensors: --layer: beyond the model's layers (expected 0 to 1 or all, got 5)\"") != std::string::npos);

    r = attn_test::run_attn("compute " + gpt2 + " --layer 1 --ids 1,2,3 --plot '" + dir.path + "/w.png' --dump weights -o '" +
                            dir.path + "/w.json'");
    CHECK_MESSAGE(r.code == 0, r.err);
    CHECK(std::filesystem::file_size(dir.path + "/w.png") > 1000);
    for (const std::string format : {"csv", "table", "npz", "jsonl"}) {
        CAPTURE(format);
        r = attn_test::run_attn("compute " + gpt2 + " --layer all --ids 1,2 --dump x_norm,weights --format " + format);
        CHECK_MESSAGE(r.code == 0, r.err);
        CHECK(!r.out.empty());
    }
}

TEST_CASE("checkpoint refusals: one line, exit 1 for data and 2 for options, nothing written") {
    attn_test::scratch_dir dir;
    refused(fixtures + "gpt2-missing-tensor/model.safetensors --layer all --ids 1,2", 1,
            fixtures + "gpt2-missing-tensor/model.safetensors: no tensor transformer.h.0.ln_2.bias (the gpt2 family needs it)");
    refused(gpt2 + " --layer 2 --ids 1,2", 2, "--layer: beyond the model's layers (expected 0 to 1 or all, got 2)");
    refused(gpt2 + " --layer x1 --ids 1,2", 2, "--layer: not a layer (expected a number ≥ 0, a range A-B, a list of them such as 0,5,10-12, or all, got x1)");
    refused(gpt2 + " --layer 0 --ids 512", 1,
            "token_ids: id out of range at index 0: the vocabulary has 512 tokens (expected 0 to 511, got 512)");
    refused(gpt2 + " --layer 0 --ids 1,-1", 2, "--ids: out of range (expected ids from 0 to 9223372036854775807, got -1)");
    const std::string config = attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/data/gpt2-tiny/config.json");
    std::string wide = config;
    wide.replace(wide.find("\"n_embd\": 32"), 12, "\"n_embd\": 48");
    attn_test::spit(dir.path + "/wide.json", wide);
    refused(gpt2 + " --layer 0 --ids 1 --config '" + dir.path + "/wide.json'", 1,
            gpt2 + ": transformer.wte.weight does not fit the config (vocab_size × n_embd) (expected (512, 48), got (512, 32))");
    attn_test::spit(dir.path + "/t5.json", "{\"model_type\": \"t5\"}");
    refused(gpt2 + " --layer 0 --ids 1 --config '" + dir.path + "/t5.json'", 1,
            dir.path + "/t5.json: model_type \"t5\" is not a family attn knows (expected " + attn_test::known_families_expected() + ")");
    std::string yarn = attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/data/llama-tiny/config.json");
    yarn.replace(yarn.find("\"rope_scaling\": null"), 20, "\"rope_scaling\": {\"rope_type\": \"mrope\", \"factor\": 4.0}");
    attn_test::spit(dir.path + "/yarn.json", yarn);
    refused(llama + " --layer 0 --ids 1 --config '" + dir.path + "/yarn.json'", 1,
            dir.path + "/yarn.json: rope_scaling \"mrope\" is not implemented by attn (expected \"default\", \"linear\", "
                       "\"dynamic\", \"yarn\", \"llama3\" or \"longrope\"; positions would be rotated wrongly)");
    std::filesystem::copy(std::string(ATTN_SOURCE_DIR) + "/" + gpt2, dir.path + "/lone.safetensors");
    refused("'" + dir.path + "/lone.safetensors' --layer 0 --ids 1", 1,
            dir.path + "/lone.safetensors: no config.json beside the checkpoint (expected " + dir.path +
                "/config.json, or give --config FILE, or --arch and --heads)");
    // Without --layer a model computes every layer (docs/design.md §6.2): --arch alone runs.
    CHECK(attn_test::run_attn("compute " + gpt2 + " --arch gpt2 --ids 1").code == 0);
    refused(gpt2 + " --layer all --x " + fixtures + "gpt2-tiny/expected.npz:x_layer1", 2,
            "--layer: all runs every block from token ids (expected --ids or --token-ids with --layer all, or --layer N "
            "with --x, got --x)");
    refused(gpt2 + " --layer 0 --x " + fixtures + "gpt2-tiny/expected.npz:x_layer1 --ids 1", 2,
            "--x: X given twice (expected token ids or --x, not both, got both)");
    refused(gpt2 + " --layer 0", 2, "attn compute: a checkpoint needs its input (expected --ids, --token-ids FILE or --x FILE, got none)");
    refused(gpt2 + " --layer 0 --x " + fixtures + "gpt2-tiny/expected.npz:weights", 1,
            fixtures + "gpt2-tiny/expected.npz:weights: x: wrong rank (expected (T, hidden) or (B, T, hidden), got (2, 4, 8, 8))");
    refused(gpt2 + " --layer 0 --x data/x.npy", 1,
            "data/x.npy: x: does not fit the model's hidden size (expected (…, 32), got (4, 8))");
    refused("--layer 0 --ids 1", 2, "--layer: needs a checkpoint file (expected INPUT model.safetensors or its .index.json, got none)");
    refused(gpt2 + " --layer 0 --ids 1 --wq data/x.npy", 2,
            "w_q: does not apply to a checkpoint, whose weights come from it (expected ids or x, masks and position_ids, got w_q)");
    refused("data/notebook.npz --vocab data/gpt2-tiny/tokenizer.json", 2,
            "--vocab: applies to a checkpoint (expected --layer N or --layer all, got no --layer)");
    refused(gpt2 + " --layer 0 --ids 1,2 --vocab data/gpt2-tiny/config.json", 1,
            "data/gpt2-tiny/config.json: tokenizer: missing field 'model'");
    refused("data/notebook.npz --dump x_norm", 2, "--dump: x_norm is a checkpoint's stage (expected a checkpoint with --layer, got no checkpoint)");
    refused(gpt2 + " --layer 0 --ids 1,2 --dump rollout", 2, "--dump: rollout needs several layers (expected --layer all, got --layer 0)");
    refused(gpt2 + " --layer all --ids 1,2 --dump rollout --average-heads", 2,
            "--dump: rollout averages the heads itself (expected no --average-heads, got --average-heads)");
    refused(gpt2, 2, "attn compute: a checkpoint needs its input (expected --ids, --token-ids FILE or --x FILE, got none)");
    // Nothing partial: a refused run leaves no output file.
    const auto r = attn_test::run_attn("compute " + gpt2 + " --layer 0 --ids 999 -o '" + dir.path + "/out.json'");
    CHECK(r.code == 1);
    CHECK(!std::filesystem::exists(dir.path + "/out.json"));
}

namespace {

/// config.json of data/<model>-tiny with `key` set to the JSON `value` (added when absent).
std::string config_with(const std::string& model, const std::string& key, const std::string& value) {
    auto j = nlohmann::ordered_json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/data/" + model + "-tiny/config.json"));
    j[key] = nlohmann::ordered_json::parse(value);
    return j.dump(2);
}

}  // namespace

TEST_CASE("config keys that change attention in transformers are honoured or refused by name") {
    attn_test::scratch_dir dir;
    const auto refused_with = [&](const std::string& model, const std::string& key, const std::string& value,
                                  const std::string& message) {
        CAPTURE(key);
        const std::string cfg = dir.path + "/" + key + ".json";
        attn_test::spit(cfg, config_with(model, key, value));
        refused("data/" + model + "-tiny/model.safetensors --layer 0 --ids 1 --config '" + cfg + "'", 1, cfg + ": " + message);
    };
    refused_with("gpt2", "add_cross_attention", "true",
                 "add_cross_attention: not implemented by attn, cross-attention blocks need encoder states (expected false, got true)");
    refused_with("gpt2", "scale_attn_weights", "\"no\"", "scale_attn_weights: not a boolean (expected true or false, got \"no\")");
    refused_with("bert", "position_embedding_type", "\"relative_key\"",
                 "position_embedding_type: not implemented by attn, relative position scores are not computed "
                 "(expected \"absolute\", got \"relative_key\")");
    refused_with("bert", "is_decoder", "true",
                 "is_decoder: not implemented by attn, a decoder BERT is causal and may cross-attend (expected false, got true)");
    refused_with("llama", "rope_parameters", "{\"rope_type\": \"dynamic_alpha\", \"rope_theta\": 500.0}",
                 "rope_parameters \"dynamic_alpha\" is not implemented by attn (expected \"default\", \"linear\", "
                 "\"dynamic\", \"yarn\", \"llama3\" or \"longrope\"; positions would be rotated wrongly)");
    refused_with("llama", "rope_scaling", "{\"rope_type\": \"llama3\", \"factor\": 8.0}",
                 "rope_scaling: llama3 without original_max_position_embeddings (expected an integer, got none)");
    refused_with("llama", "rope_scaling", "{\"rope_type\": \"linear\", \"factor\": \"two\"}",
                 "rope_scaling.factor: not a number (expected a number, got \"two\")");
    // A number beyond double is invalid JSON, not a crash.
    attn_test::spit(dir.path + "/huge.json", "{\"model_type\": \"llama\", \"rope_theta\": 1e999}");
    refused(llama + " --layer 0 --ids 1 --config '" + dir.path + "/huge.json'", 1,
            dir.path + "/huge.json: invalid JSON (number overflow parsing '1e999')");
    refused_with("llama", "pretraining_tp", "0", "pretraining_tp: not a positive integer (expected a positive integer, got 0)");
    // attention_bias true needs the biases; Qwen2's biases under a llama config are not dropped silently.
    attn_test::spit(dir.path + "/bias.json", config_with("llama", "attention_bias", "true"));
    refused(llama + " --layer 0 --ids 1 --config '" + dir.path + "/bias.json'", 1,
            llama + ": no tensor model.layers.0.self_attn.q_proj.bias (the llama family needs it)");
    std::string qwen = attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + fixtures + "qwen2-tiny/config.json");
    qwen.replace(qwen.find("\"qwen2\""), 7, "\"llama\"");
    attn_test::spit(dir.path + "/qwen-as-llama.json", qwen);
    refused(fixtures + "qwen2-tiny/model.safetensors --layer 0 --ids 1 --config '" + dir.path + "/qwen-as-llama.json'", 1,
            "model.layers.0.self_attn.q_proj.bias: in the checkpoint, but the config has no q_proj bias (attention_bias is "
            "false) (expected no bias tensor, or attention_bias true, got a bias)");
    // Accepted: pretraining_tp > 1 (slices of the same products), attn_pdrop (dropout is off at inference).
    for (const auto& [key, value] : {std::pair<std::string, std::string>{"pretraining_tp", "2"}, {"attn_pdrop", "0.5"}}) {
        CAPTURE(key);
        attn_test::spit(dir.path + "/ok.json", config_with(key == "attn_pdrop" ? "gpt2" : "llama", key, value));
        const auto r = attn_test::run_attn("compute data/" + std::string(key == "attn_pdrop" ? "gpt2" : "llama") +
                                           "-tiny/model.safetensors --layer 0 --ids 1,2 --dump weights --config '" + dir.path + "/ok.json'");
        CHECK_MESSAGE(r.code == 0, r.err);
    }
}

TEST_CASE("--layer says what a file that is not a safetensors checkpoint is") {
    attn_test::scratch_dir dir;
    std::filesystem::copy(std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/foreign/tensor.pt", dir.path + "/pytorch_model.bin");
    refused("'" + dir.path + "/pytorch_model.bin' --layer 0 --ids 1", 1,
            dir.path + "/pytorch_model.bin: not a .npy, .npz, .safetensors or JSON file: a PyTorch archive (save tensors with "
                       "numpy.save or safetensors.torch.save_file)");
    refused("tests/fixtures/foreign/legacy.pt --layer 0 --ids 1", 1,
            "tests/fixtures/foreign/legacy.pt: not a .npy, .npz, .safetensors or JSON file: a PyTorch archive (save tensors with "
            "numpy.save or safetensors.torch.save_file)");
    refused("data/gpt2-tiny/config.json --layer 0 --ids 1", 1,
            "data/gpt2-tiny/config.json: not a safetensors checkpoint: JSON without a weight_map (expected model.safetensors or "
            "model.safetensors.index.json, got JSON; a config.json goes to --config)");
    refused("data/notebook.npz --layer 0 --ids 1", 1,
            "data/notebook.npz: not a safetensors checkpoint: an .npz archive (expected model.safetensors or "
            "model.safetensors.index.json, got .npz)");
    refused("data/x.npy --layer 0 --ids 1", 1,
            "data/x.npy: not a safetensors checkpoint: a .npy array (expected model.safetensors or "
            "model.safetensors.index.json, got .npy)");
}

TEST_CASE("a checkpoint without config.json: --arch and --heads stand in, the sizes come from the tensors") {
    attn_test::scratch_dir dir;
    for (const std::string model : {"gpt2", "bert", "llama"}) {
        CAPTURE(model);
        std::filesystem::create_directories(dir.path + "/" + model);
        const std::string lone = dir.path + "/" + model + "/model.safetensors";
        std::filesystem::copy(std::string(ATTN_SOURCE_DIR) + "/data/" + model + "-tiny/model.safetensors", lone);
        const std::string args = " --layer all --ids 1,2,3 --dump weights,output --dtype float64 --format npz -o ";
        const std::string kv = model == "llama" ? " --rope-theta 500" : "";
        auto r = attn_test::run_attn("compute '" + lone + "' --arch " + model + " --heads 4" + kv + args + "'" + dir.path + "/a.npz'");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        r = attn_test::run_attn("compute data/" + model + "-tiny/model.safetensors" + args + "'" + dir.path + "/b.npz'");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        // The same model as with its config.json (llama-tiny's rope_theta 500 is given, its
        // rms_norm_eps 1e-6 is LlamaConfig's default).
        // (Their stages: the meta beside them names the options given, which differ.)
        const auto a = attn::io::read_npz(attn_test::slurp(dir.path + "/a.npz"), "a.npz");
        const auto b = attn::io::read_npz(attn_test::slurp(dir.path + "/b.npz"), "b.npz");
        REQUIRE(a.size() == b.size());
        for (std::size_t i = 0; i < a.size(); ++i) {
            CHECK(a[i].name == b[i].name);
            CHECK(a[i].value.shape == b[i].value.shape);
            CHECK(a[i].value.data.to_vector() == b[i].value.data.to_vector());
        }
        refused("'" + lone + "' --arch " + model + " --layer 0 --ids 1", 1,
                lone + ": num_attention_heads: not in the tensors' shapes, and there is no config.json (expected --heads N or "
                       "--config FILE, got neither)");
    }
    refused("'" + dir.path + "/llama/model.safetensors' --arch llama --heads 5 --layer 0 --ids 1", 1,
            dir.path + "/llama/model.safetensors: head_dim: --heads 5 does not divide model.layers.0.self_attn.q_proj.weight's "
                       "32 rows (expected a divisor of 32, got 5)");
}

TEST_CASE("config sizes: heads that do not divide, counts over the limit refused before allocating") {
    attn_test::scratch_dir dir;
    const auto refused_with = [&](const std::string& model, const std::string& key, const std::string& value, int code,
                                  const std::string& message) {
        CAPTURE(key);
        const std::string cfg = dir.path + "/" + key + ".json";
        attn_test::spit(cfg, config_with(model, key, value));
        refused("data/" + model + "-tiny/model.safetensors --layer 0 --ids 1 --config '" + cfg + "'", code, cfg + ": " + message);
    };
    refused_with("llama", "num_attention_heads", "5", 1,
                 "num_attention_heads 5 does not divide hidden_size 32 (expected a divisor of 32, or a head_dim, got 5)");
    refused_with("gpt2", "n_head", "5", 1, "n_head 5 does not divide n_embd 32 (expected a divisor of 32, got 5)");
    refused_with("llama", "head_dim", "4611686018427387904", 1,
                 "head_dim: more than attn accepts (expected at most 16777216, got 4611686018427387904)");
    refused_with("llama", "num_hidden_layers", "40000000000", 1,
                 "num_hidden_layers: more than attn accepts (expected at most 16777216, got 40000000000)");
    // Peak memory of that run alone (attn_test::run_attn_measured).
    const auto m = attn_test::run_attn_measured("compute " + llama + " --layer 0 --ids 1 --config '" + dir.path + "/num_hidden_layers.json'");
    CHECK_MESSAGE(m.code == 1, "not refused; peak " << m.peak_kb << " KiB");
    const long peak_kb = m.peak_kb;
    CHECK(peak_kb < attn_test::peak_bound_mb(100) * 1024);  // KiB: nothing sized by num_hidden_layers (it took > 8 GB before)
    // Counts within the limit are held against the tensors before anything is sized by them.
    attn_test::spit(dir.path + "/layers.json", config_with("gpt2", "n_layer", "16777216"));
    refused(gpt2 + " --layer 0 --ids 1 --config '" + dir.path + "/layers.json'", 1,
            gpt2 + ": no tensor transformer.h.16777215.attn.c_attn.weight (the gpt2 family needs it)");
    attn_test::spit(dir.path + "/vocab.json", config_with("bert", "vocab_size", "16777216"));
    refused("data/bert-tiny/model.safetensors --layer 0 --ids 1 --config '" + dir.path + "/vocab.json'", 1,
            "data/bert-tiny/model.safetensors: embeddings.word_embeddings.weight does not fit the config (vocab_size × "
            "hidden_size) (expected (16777216, 32), got (512, 32))");
}

TEST_CASE("qwen2 max_window_layers 0: every layer slides (Qwen2Config layer_types)") {
    attn_test::scratch_dir dir;
    std::string cfg = attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + fixtures + "qwen2-tiny/config.json");
    cfg.replace(cfg.find("\"max_window_layers\": 1"), 22, "\"max_window_layers\": 0");
    attn_test::spit(dir.path + "/c.json", cfg);
    const auto r = attn_test::run_attn("compute " + fixtures + "qwen2-tiny/model.safetensors --layer all --ids 1,2,3,4,5 "
                                       "--dump weights --config '" + dir.path + "/c.json'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j.at("meta").at("model").at("sliding_layers") == nlohmann::json{0, 1});
    // sliding_window 3: query 4 sees keys 2..4 only, in layer 0 as in layer 1.
    for (int l = 0; l < 2; ++l) CHECK(j.at("weights")[l][0][4][1] == 0);
    CHECK(j.at("weights")[0][0][4][2] != 0);
}

TEST_CASE("batched token ids are labelled per item through --vocab") {
    attn_test::scratch_dir dir;
    const auto ids_file = [&](const std::string& name, const std::vector<long long>& ids) {
        std::string data(ids.size() * 8, '\0');
        std::memcpy(data.data(), ids.data(), data.size());  // little-endian int64, as '<i8' says
        attn_test::spit(dir.path + "/" + name, io_test::npy_v1("<i8", "(2, 3)", data));
        return dir.path + "/" + name;
    };
    // Two items that differ: each keeps its own labels in meta.model.tokens (GPT-2 byte-level decoded).
    auto r = attn_test::run_attn("compute " + gpt2 + " --layer 0 --token-ids '" + ids_file("two.npy", {464, 11, 262, 262, 0, 464}) +
                                 "' --vocab data/gpt2-tiny/tokenizer.json --dump weights");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j.at("meta").at("model").at("tokens") ==
          nlohmann::json{{"The", ",", " the"}, {" the", "!", "The"}});
    CHECK(j.at("tokens") == j.at("meta").at("model").at("tokens"));  // no one row labelling fits both: one list per item
    // Items that read the same label the rows as one sequence does.
    r = attn_test::run_attn("compute " + gpt2 + " --layer 0 --token-ids '" + ids_file("same.npy", {464, 11, 262, 464, 11, 262}) +
                            "' --vocab data/gpt2-tiny/tokenizer.json --dump weights");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    j = nlohmann::json::parse(r.out);
    CHECK(j.at("tokens") == nlohmann::json{"The", ",", " the"});
    CHECK(j.at("meta").at("model").at("tokens") == nlohmann::json{{"The", ",", " the"}, {"The", ",", " the"}});
}

TEST_CASE("a model directory as INPUT: its model.safetensors or index and config.json, as from_pretrained") {
    attn_test::scratch_dir dir;
    const std::string src = std::string(ATTN_SOURCE_DIR) + "/data/llama-tiny";
    const std::string model = dir.path + "/llama-tiny";
    std::filesystem::create_directory(model);
    for (const char* f : {"model.safetensors", "config.json", "tokenizer.json"})
        std::filesystem::copy(src + "/" + f, model + "/" + f);
    const std::string args = " --layer all --ids 1,3,4 --dump weights --format json";
    const auto want = attn_test::run_attn("compute " + llama + args);
    REQUIRE_MESSAGE(want.code == 0, want.err);
    const auto got = attn_test::run_attn("compute '" + model + "'" + args);
    REQUIRE_MESSAGE(got.code == 0, got.err);
    const auto jw = nlohmann::json::parse(want.out), jg = nlohmann::json::parse(got.out);
    CHECK(jg["weights"] == jw["weights"]);
    CHECK(jg["meta"]["model"]["checkpoint"] == model + "/model.safetensors");
    CHECK(jg.at("tokens") == jw.at("tokens"));
    // A trailing slash, and a sharded directory (its index).
    const auto slash = attn_test::run_attn("compute '" + model + "/'" + args);
    CHECK_MESSAGE(slash.code == 0, slash.err);
    const std::string sharded = dir.path + "/sharded";
    std::filesystem::copy(std::string(ATTN_SOURCE_DIR) + "/" + fixtures + "llama-tiny-sharded", sharded);
    const auto shards = attn_test::run_attn("compute '" + sharded + "'" + args);
    REQUIRE_MESSAGE(shards.code == 0, shards.err);
    CHECK(nlohmann::json::parse(shards.out)["weights"] == jw["weights"]);
    // A directory without weights is refused, naming what it looked for.
    const std::string empty = dir.path + "/empty";
    std::filesystem::create_directory(empty);
    std::filesystem::copy(src + "/config.json", empty + "/config.json");
    refused("'" + empty + "' --layer 0 --ids 1", 1,
            empty + ": a directory without a checkpoint (expected model.safetensors or model.safetensors.index.json in it)");
}

TEST_CASE("rope_scaling from config.json: recorded in meta.model, and it changes the weights") {
    attn_test::scratch_dir dir;
    const std::string ck = fixtures + "llama3-rope-tiny/model.safetensors";
    const auto r = attn_test::run_attn("compute " + ck + " --layer 0 --ids 1,3,4,5,6,7,8,9,10,11,12,13 --dump weights --format json");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const auto j = nlohmann::json::parse(r.out);
    const auto& rs = j["meta"]["model"]["rope_scaling"];
    CHECK(rs["rope_type"] == "llama3");
    CHECK(rs["factor"] == 8.0);
    CHECK(rs["original_max_position_embeddings"] == 8);
    CHECK(rs["low_freq_factor"] == 1.0);
    CHECK(rs["high_freq_factor"] == 4.0);
    CHECK(rs["rope_theta"] == 500.0);
    // The same checkpoint with rope_scaling null computes other weights.
    auto cfg = nlohmann::ordered_json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/" + fixtures + "llama3-rope-tiny/config.json"));
    cfg["rope_scaling"] = nullptr;
    attn_test::spit(dir.path + "/plain.json", cfg.dump(2));
    const auto p = attn_test::run_attn("compute " + ck + " --layer 0 --ids 1,3,4,5,6,7,8,9,10,11,12,13 --dump weights --format json "
                                       "--config '" + dir.path + "/plain.json'");
    REQUIRE_MESSAGE(p.code == 0, p.err);
    const auto jp = nlohmann::json::parse(p.out);
    CHECK(!jp["meta"]["model"].contains("rope_scaling"));
    CHECK(jp["weights"] != j["weights"]);
    // transformers' defaults: "su" is longrope, whose factor is max_position_embeddings /
    // original_max_position_embeddings (64 / 16) when absent, original read at the top
    // level as Phi-3 writes it; yarn's original defaults to max_position_embeddings.
    const auto meta_of = [&](const std::string& key, const std::string& value, const std::string& extra_key = "",
                             const std::string& extra = "") {
        auto c = nlohmann::ordered_json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/data/llama-tiny/config.json"));
        c[key] = nlohmann::ordered_json::parse(value);
        if (!extra_key.empty()) c[extra_key] = nlohmann::ordered_json::parse(extra);
        attn_test::spit(dir.path + "/c.json", c.dump(2));
        const auto q = attn_test::run_attn("compute " + llama + " --layer 0 --ids 1,2 --dump weights --config '" + dir.path + "/c.json'");
        REQUIRE_MESSAGE(q.code == 0, q.err);
        return nlohmann::json::parse(q.out)["meta"]["model"]["rope_scaling"];
    };
    const auto su = meta_of("rope_scaling", "{\"type\": \"su\", \"short_factor\": [1, 1, 1, 1], \"long_factor\": [1, 2, 3, 4]}",
                            "original_max_position_embeddings", "16");
    CHECK(su["rope_type"] == "longrope");
    CHECK(su["factor"] == 4.0);
    CHECK(su["original_max_position_embeddings"] == 16);
    const auto yarn = meta_of("rope_parameters", "{\"rope_type\": \"yarn\", \"rope_theta\": 500.0, \"factor\": 2.0}");
    CHECK(yarn["rope_type"] == "yarn");
    CHECK(yarn["original_max_position_embeddings"] == 64);
    const auto dynamic = meta_of("rope_scaling", "{\"rope_type\": \"dynamic\", \"factor\": 2.0}");
    CHECK(dynamic["max_position_embeddings"] == 64);
    // A longrope factor list of the wrong length is core's shape error, named by the file and key.
    auto bad = nlohmann::ordered_json::parse(attn_test::slurp(std::string(ATTN_SOURCE_DIR) + "/data/llama-tiny/config.json"));
    bad["rope_scaling"] = nlohmann::ordered_json::parse("{\"rope_type\": \"longrope\", \"short_factor\": [1], \"long_factor\": [1]}");
    attn_test::spit(dir.path + "/bad.json", bad.dump(2));
    const auto b = attn_test::run_attn("compute " + llama + " --layer 0 --ids 1,2 --config '" + dir.path + "/bad.json'");
    CHECK(b.code == 1);
    CHECK(b.err == "attn: error: " + dir.path + "/bad.json: rope_scaling.short_factor: has one factor per rotated pair "
                   "(expected R/2 = 4, got 1 values)\n");
}

TEST_CASE("a checkpoint without its embedding table runs from --x, and refuses token ids naming the table") {
    attn_test::scratch_dir dir;
    const std::string ck = "tests/fixtures/checkpoints/llama-tiny-no-embedding";
    const std::string ref = "tests/fixtures/checkpoints/llama-tiny/expected.npz";
    auto r = attn_test::run_attn("compute " + ck + " --layer 1 --x " + ref + ":x_layer1 --dump weights,output --dtype float64 "
                                 "--format npz -o '" + dir.path + "/out.npz'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const auto got = attn_test::read_npz_file(dir.path + "/out.npz");
    const auto want = attn_test::read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + ref);
    for (const std::string stage : {"weights", "output"}) {
        CAPTURE(stage);
        const auto cmp = attn_test::compare_arrays(attn_test::member(got, stage), attn_test::at(attn_test::member(want, stage), 1), 1e-9, 1e-9);
        CHECK_MESSAGE(cmp.ok, cmp.summary);
    }
    r = attn_test::run_attn("compute " + ck + " --layer all --ids 1,2,3");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + ck + "/model.safetensors: no tensor model.embed_tokens.weight (the llama family needs it)\n");
}
