// Word-level attention, `--words` (docs/design.md §5.3; Clark et al. 2019, §4.1), on the
// shipped tiny checkpoints from text: word_weights against the run's own token weights
// merged by a naive loop here, with the words HF tokenizers gives (word_ids and byte
// offsets from tests/fixtures/tokenizer/conformance/*-tiny.expected.jsonl, made by the
// reference library itself); a padded batch; every format and the view; the refusals.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "npz_members.hpp"
#include "scratch_dir.hpp"
#include "tokenizer_compare.hpp"

namespace {

using nlohmann::json;

/// HF tokenizers' encoding (with special tokens) of `text` by data/<model>-tiny's tokenizer.json.
json reference(const std::string& model, const std::string& text) {
    for (const auto& l : attn_test::read_json_lines(std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/tokenizer/conformance/" +
                                                    model + "-tiny.expected.jsonl"))
        if (l.at("text") == text) return l.at("with_special");
    FAIL("no reference encoding of " << text);
    return {};
}

/// The words of an encoding as Clark et al. group them: tokens sharing a word id, and each
/// token without one on its own; in order of first token. Returns each token's word and
/// each word's label (the text over its tokens' bytes; a special token's own string).
struct words_of {
    std::vector<std::size_t> word;
    std::vector<std::string> labels;
    std::vector<std::size_t> size;
};

words_of group(const json& e, const std::string& text) {
    words_of w;
    std::map<long long, std::size_t> seen;
    const auto& ids = e.at("word_ids");
    for (std::size_t t = 0; t < ids.size(); ++t) {
        const auto off = e.at("byte_offsets").at(t);
        const std::size_t from = off.at(0), to = off.at(1);
        if (!ids[t].is_null() && seen.count(ids[t].get<long long>())) {
            const std::size_t k = seen[ids[t].get<long long>()];
            w.word.push_back(k);
            ++w.size[k];
            continue;
        }
        if (!ids[t].is_null()) seen[ids[t].get<long long>()] = w.labels.size();
        w.word.push_back(w.labels.size());
        w.size.push_back(1);
        // The label: the text over every token of the word (found by scanning them all).
        std::size_t lo = from, hi = to;
        for (std::size_t u = t + 1; u < ids.size(); ++u)
            if (!ids[t].is_null() && ids[u] == ids[t]) hi = std::max<std::size_t>(hi, e.at("byte_offsets").at(u).at(1));
        w.labels.push_back(ids[t].is_null() ? e.at("tokens").at(t).get<std::string>() : text.substr(lo, hi - lo));
    }
    return w;
}

/// Clark et al. 2019 §4.1 by hand: out[Q][K] = mean over i ∈ Q of Σ_{j ∈ K} w[i][j], over
/// the first n tokens of a (T, T) block.
std::vector<double> merge(const std::vector<double>& w, std::size_t T, const words_of& g, std::size_t n) {
    const std::size_t W = g.labels.size();
    std::vector<double> out(W * W, 0.0);
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j) out[g.word[i] * W + g.word[j]] += w[i * T + j] / static_cast<double>(g.size[g.word[i]]);
    return out;
}

std::vector<double> flat(const json& j) {
    std::vector<double> out;
    if (!j.is_array()) {
        out.push_back(j.get<double>());
        return out;
    }
    for (const auto& x : j)
        for (double v : flat(x)) out.push_back(v);
    return out;
}

}  // namespace

TEST_CASE("--words: word_weights are the weights summed over a key word's tokens and averaged over a query word's") {
    const std::string text = "Hello, world! How are you doing today?";
    const json e = reference("gpt2", text);
    const words_of g = group(e, text);
    REQUIRE(g.labels.size() < e.at("ids").size());  // some words have several tokens
    const auto r = attn_test::run_attn("compute data/gpt2-tiny --layer all --text '" + text +
                                       "' --words --dump weights --dtype float64 --compact");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const json j = json::parse(r.out);
    CHECK(j.at("words") == json(g.labels));
    CHECK(j.at("meta").at("model").at("text").at("words") == json{g.labels});
    // weights, then word_weights (--words adds it last), with the run's tokens.
    CHECK(j.at("meta").at("shapes").at("word_weights") == json{2, 4, g.labels.size(), g.labels.size()});
    const std::size_t T = e.at("ids").size(), W = g.labels.size();
    const std::vector<double> w = flat(j.at("weights")), ww = flat(j.at("word_weights"));
    REQUIRE(w.size() == 2 * 4 * T * T);
    REQUIRE(ww.size() == 2 * 4 * W * W);
    for (std::size_t block = 0; block < 8; ++block) {
        const std::vector<double> expected = merge(std::vector<double>(w.begin() + static_cast<std::ptrdiff_t>(block * T * T),
                                                                       w.begin() + static_cast<std::ptrdiff_t>((block + 1) * T * T)),
                                                   T, g, T);
        for (std::size_t c = 0; c < W * W; ++c) CHECK(ww[block * W * W + c] == doctest::Approx(expected[c]).epsilon(1e-12));
        // Every word row sums to 1, as its token rows do; a causal model gives no weight
        // to a later word.
        for (std::size_t q = 0; q < W; ++q) {
            double sum = 0;
            for (std::size_t k = 0; k < W; ++k) sum += ww[block * W * W + q * W + k];
            CHECK(sum == doctest::Approx(1.0).epsilon(1e-12));
            for (std::size_t k = q + 1; k < W; ++k) CHECK(ww[block * W * W + q * W + k] == 0.0);
        }
    }
    // Only word_weights when weights were not asked for.
    const auto only = attn_test::run_attn("compute data/gpt2-tiny --layer 1 --text '" + text + "' --words --dump output --compact");
    REQUIRE_MESSAGE(only.code == 0, only.err);
    const json o = json::parse(only.out);
    CHECK(!o.contains("weights"));
    CHECK(o.at("meta").at("shapes").at("word_weights") == json{4, W, W});
    CHECK(o.contains("output"));
}

TEST_CASE("--words on a padded batch: each text's own words, padding in no word, the shorter text's extra words 0") {
    const std::string a = "Hello, world! How are you doing today?", b = "Hello world!";
    const json ea = reference("bert", a), eb = reference("bert", b);
    const words_of ga = group(ea, a), gb = group(eb, b);
    const auto r = attn_test::run_attn("compute data/bert-tiny --layer 0 --text '" + a + "' --text '" + b +
                                       "' --dump weights,word_weights --dtype float64 --compact");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const json j = json::parse(r.out);
    CHECK(!j.contains("words"));  // the texts' words differ: each in meta
    CHECK(j.at("meta").at("model").at("text").at("words") == json{ga.labels, gb.labels});
    const std::size_t T = ea.at("ids").size(), n = eb.at("ids").size(), W = ga.labels.size();
    REQUIRE(n < T);
    CHECK(j.at("meta").at("shapes").at("word_weights") == json{2, 4, W, W});
    const std::vector<double> w = flat(j.at("weights")), ww = flat(j.at("word_weights"));
    for (std::size_t item = 0; item < 2; ++item)
        for (std::size_t h = 0; h < 4; ++h) {
            const std::size_t block = item * 4 + h;
            const std::vector<double> tokens(w.begin() + static_cast<std::ptrdiff_t>(block * T * T),
                                             w.begin() + static_cast<std::ptrdiff_t>((block + 1) * T * T));
            const words_of& g = item ? gb : ga;
            const std::vector<double> expected = merge(tokens, T, g, item ? n : T);
            const std::size_t wn = g.labels.size();
            for (std::size_t q = 0; q < W; ++q)
                for (std::size_t k = 0; k < W; ++k) {
                    const double got = ww[block * W * W + q * W + k];
                    if (q < wn && k < wn) CHECK(got == doctest::Approx(expected[q * wn + k]).epsilon(1e-12));
                    else CHECK(got == 0.0);
                }
        }
}

TEST_CASE("--words reaches every format and the view, with the words as labels") {
    attn_test::scratch_dir dir;
    const std::string run = "compute data/llama-tiny --layer all --text 'The capital of France is' --words";
    for (const std::string ext : {"npz", "csv", "jsonl", "html"}) {
        CAPTURE(ext);
        const auto r = attn_test::run_attn(run + " -o '" + dir.path + "/out." + ext + "'");
        REQUIRE_MESSAGE(r.code == 0, r.err);
    }
    const auto members = attn_test::read_npz_file(dir.path + "/out.npz");
    CHECK(attn_test::find_array(members, "word_weights") != nullptr);
    CHECK(attn_test::slurp(dir.path + "/out.csv").find("word_weights") != std::string::npos);
    // The view's data: the stage, and the words its axes are labelled with.
    const std::string page = attn_test::slurp(dir.path + "/out.html");
    CHECK(page.find(R"("name":"word_weights","L":2,"B":1,"H":4,"Tq":6,"Tk":6)") != std::string::npos);
    CHECK(page.find(R"("words":["\u003c|begin_of_text|>","The"," capital"," of"," France"," is"])") != std::string::npos);
    // attn plot takes a model directory and text as attn compute does.
    for (const std::string ck : {"data/llama-tiny", "data/llama-tiny/model.safetensors"}) {
        const auto p = attn_test::run_attn("plot " + ck + " --layer 1 --text 'The capital of France is' -o '" + dir.path + "/" +
                                           (ck.size() > 16 ? "file" : "dir") + ".png'");
        REQUIRE_MESSAGE(p.code == 0, p.err);
    }
    CHECK(attn_test::slurp(dir.path + "/dir.png") == attn_test::slurp(dir.path + "/file.png"));
    // Table: the words label the rows and columns (Llama 3's BOS is a word of its own;
    // its post-processor keeps a word's leading space in the offsets, trim_offsets false).
    const auto t = attn_test::run_attn(run + " --dump word_weights --average-heads --format table --precision 2");
    REQUIRE_MESSAGE(t.code == 0, t.err);
    CHECK(t.out.find("                   <|begin_of_text|>    The   capital      of   France     is\n"
                     "<|begin_of_text|>                  1      0         0       0        0      0\n") != std::string::npos);
    CHECK(t.out.find("\n capital   ") != std::string::npos);
    // A manifest job takes "words" too.
    attn_test::spit(dir.path + "/jobs.jsonl", json{{"input", std::string(ATTN_SOURCE_DIR) + "/data/llama-tiny"},
                                                   {"layer", "0"},
                                                   {"text", {"The capital of France is"}},
                                                   {"words", true},
                                                   {"dump", "output"}}
                                                      .dump() +
                                                  "\n");
    const auto m = attn_test::run_attn("compute --manifest '" + dir.path + "/jobs.jsonl' --compact");
    REQUIRE_MESSAGE(m.code == 0, m.err);
    CHECK(json::parse(m.out).at("words") == json{"<|begin_of_text|>", "The", " capital", " of", " France", " is"});
}

TEST_CASE("--words refusals: no text, no checkpoint") {
    auto r = attn_test::run_attn("compute data/gpt2-tiny --layer 0 --ids 1,2,3 --words");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --words: merges tokens into the words of a text (expected --text or --text-file, got token ids)\n");
    CHECK(r.out.empty());
    r = attn_test::run_attn("compute data/notebook.npz --dump word_weights");
    CHECK(r.code == 2);
    CHECK(r.err ==
          "attn: error: --dump: word_weights merges tokens into the words of a text (expected a checkpoint with --text, got no checkpoint)\n");
    r = attn_test::run_attn("compute data/notebook.npz --words");
    CHECK(r.code == 2);
    CHECK(r.err.find("--words") != std::string::npos);
}

TEST_CASE("text in on the shipped checkpoints: the view of every layer, ids as attn tokenize and HF tokenizers give them") {
    attn_test::scratch_dir dir;
    const std::string text = "The capital of France is";
    for (const std::string model : {"gpt2", "bert", "llama"}) {
        CAPTURE(model);
        const std::string ck = "data/" + model + "-tiny";
        auto r = attn_test::run_attn("compute " + ck + " --layer all --text '" + text + "' -o '" + dir.path + "/" + model + ".html'");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        CHECK(attn_test::slurp(dir.path + "/" + model + ".html").rfind("<!DOCTYPE html>", 0) == 0);
        r = attn_test::run_attn("tokenize '" + text + "' " + ck + " --format json");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const json tokenized = json::parse(r.out);
        const json ids = tokenized.at(0).at("ids");
        CHECK(ids == reference(model, text).at("ids"));  // HF tokenizers' own ids
        r = attn_test::run_attn("compute " + ck + " --layer all --text '" + text + "' --dump weights --dtype float64 --compact");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const json from_text = json::parse(r.out);
        CHECK(from_text.at("meta").at("model").at("text").at("ids") == json{ids});
        // The same run from those ids: the same weights, bit for bit.
        std::string list;
        for (const auto& id : ids) list += (list.empty() ? "" : ",") + std::to_string(id.get<long long>());
        r = attn_test::run_attn("compute " + ck + " --layer all --ids " + list + " --dump weights --dtype float64 --compact");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        CHECK(json::parse(r.out).at("weights") == from_text.at("weights"));
    }
}

TEST_CASE("--words streamed to .npz: made layer by layer, the same bytes as the held output on stdout") {
    // word_weights is a per-layer stage (docs/design.md §5.4): each layer's weights are merged
    // into words and dropped, so a streamed .npz carries it like any other stage.
    attn_test::scratch_dir dir;
    for (const std::string dump : {"word_weights", "weights,word_weights", "word_weights,weights,scores"}) {
        CAPTURE(dump);
        const std::string args = "compute data/llama-tiny --layer all --text 'The capital of France is' --words --dump " + dump;
        const auto held = attn_test::run_attn(args + " --format npz");
        REQUIRE_MESSAGE(held.code == 0, held.err);
        const std::string file = dir.path + "/words.npz";
        const auto streamed = attn_test::run_attn(args + " -o '" + file + "'");
        REQUIRE_MESSAGE(streamed.code == 0, streamed.err);
        CHECK(attn_test::slurp(file) == held.out);
    }
}
