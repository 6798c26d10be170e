// attn view and compute --format html: the page's data, its refusals (one line, exit 1 for data, 2 for options, no
// partial page), and a run of several layers written layer by layer.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"

#include "cli_util.hpp"
#include "io_fixtures.hpp"
#include "npz_members.hpp"
#include "reference.hpp"
#include "scratch_dir.hpp"

TEST_CASE("view refusals: no Tq×Tk stage, over --max-bytes, options that do not apply, a non-HTML -o") {
    attn_test::scratch_dir dir;
    const std::string d = dir.path;
    auto r = attn_test::run_attn("compute data/notebook.npz --dump output,lse --format npz -o '" + d + "/o.npz'");
    REQUIRE(r.code == 0);
    r = attn_test::run_attn("view '" + d + "/o.npz' -o '" + d + "/v.html'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + d + "/o.npz: no Tq×Tk stage to view (expected weights, scores, scaled, qk or word_weights; found output, lse)\n");
    CHECK(!std::filesystem::exists(d + "/v.html"));

    // 100 tokens: the inputs are 100 × 4 float32 each; the run view makes plans weights,
    // scores (float32) and the mask (a byte) for 100² cells, before computing them.
    r = attn_test::run_attn("generate --len 100 --dk 4 --dv 4 --seed 1 -o '" + d + "/g.npz'");
    REQUIRE(r.code == 0);
    r = attn_test::run_attn("view '" + d + "/g.npz' --max-bytes 20K -o '" + d + "/v.html'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: this run needs about 90.0 kB for its Tq×Tk stages (B=1, H=1, Tq=Tk=100, float32) "
                   "(expected at most --max-bytes 20 KiB; raise --max-bytes or dump fewer stages)\n");
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

namespace {

using nlohmann::json;

void write_npy_file(const std::string& path, attn::shape_t shape, const std::vector<double>& v) {
    std::ofstream f(path, std::ios::binary);
    attn::io::write_npy(f, attn::array::from<double>(shape, v.data()));
}

/// Decodes one chunk's text (base64, then zlib's inflate) into `n` codes of `bytes` bytes each.
std::vector<unsigned> decode_codes(const std::string& b64, std::size_t n, int bytes) {
    static const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::vector<unsigned char> z;
    unsigned bits = 0, acc = 0;
    for (char c : b64) {
        if (c == '=') break;
        acc = (acc << 6) | static_cast<unsigned>(alphabet.find(c));
        bits += 6;
        if (bits >= 8) z.push_back(static_cast<unsigned char>((acc >> (bits -= 8)) & 0xff));
    }
    std::vector<unsigned char> raw(n * bytes);
    uLongf size = raw.size();
    REQUIRE(uncompress(raw.data(), &size, z.data(), z.size()) == Z_OK);
    REQUIRE(size == raw.size());
    std::vector<unsigned> codes(n);
    for (std::size_t i = 0; i < n; ++i) codes[i] = bytes == 2 ? raw[2 * i] | (raw[2 * i + 1] << 8) : raw[i];
    return codes;
}

/// The data block of a page (src/io/html/data.cpp): stages and rollout (each input's, on a page
/// of several) with their codes decoded from the page's chunks (one
/// <script class="attn-chunk" data-input data-stage data-layer> per layer) into "codes".
/// Every stage gets each of its layers exactly once.
json page_data(const std::string& page) {
    const std::string open = "<script type=\"application/json\" id=\"attn-data\">";
    const std::size_t at = page.find(open);
    REQUIRE(at != std::string::npos);
    const std::size_t start = at + open.size();
    json d = json::parse(page.substr(start, page.find("</script>", start) - start));
    const auto input = [&](std::size_t k) -> json& { return d.contains("inputs") ? d.at("inputs").at(k) : d; };
    const std::string chunk = "<script type=\"application/octet-stream\" class=\"attn-chunk\" data-input=\"";
    for (std::size_t p = page.find(chunk); p != std::string::npos && p < at; p = page.find(chunk, p + 1)) {
        const std::size_t close = page.find('>', p), end = page.find("</script>", close);
        const std::string tag = page.substr(p, close - p);
        const auto attribute = [&](const std::string& name) {
            const std::size_t q = tag.find(name + "=\"") + name.size() + 2;
            return tag.substr(q, tag.find('"', q) - q);
        };
        json& in = input(std::stoul(attribute("data-input")));
        const std::string stage = attribute("data-stage");
        json& st = stage == "rollout" ? in.at("rollout") : in.at("stages").at(std::stoul(stage));
        const std::size_t layer = std::stoul(attribute("data-layer"));
        const std::size_t per = st.at("B").get<std::size_t>() * st.at("H").get<std::size_t>() * st.at("Tq").get<std::size_t>() *
                                st.at("Tk").get<std::size_t>();
        const std::vector<unsigned> codes = decode_codes(page.substr(close + 1, end - close - 1), per, st.at("bits").get<int>() / 8);
        if (!st.contains("codes")) st["codes"] = std::vector<unsigned>(st.at("L").get<std::size_t>() * per, 1u << 20);
        REQUIRE(layer < st.at("L").get<std::size_t>());
        for (std::size_t i = 0; i < per; ++i) {
            REQUIRE(st["codes"][layer * per + i] == 1u << 20);  // each layer once
            st["codes"][layer * per + i] = codes[i];
        }
    }
    const auto complete = [](const json& st) {
        REQUIRE(st.contains("codes"));
        for (const auto& c : st.at("codes")) REQUIRE(c != 1u << 20);
    };
    for (std::size_t k = 0; k < (d.contains("inputs") ? d.at("inputs").size() : 1); ++k) {
        for (const auto& st : input(k).at("stages")) complete(st);
        if (!input(k).at("rollout").is_null()) complete(input(k).at("rollout"));
    }
    return d;
}

/// A code back to its value (the page's cell()): lo + code/(top − 1)·(hi − lo), with the
/// [lo, hi] of the cell's layer, which its codes are quantised over.
double value_of(const json& st, std::size_t i) {
    const double top = st.at("masked_code").get<double>();
    const std::size_t per = st.at("codes").size() / st.at("L").get<std::size_t>();
    const json& range = st.at("layers").at(i / per);
    const double lo = range[0].get<double>(), hi = range[1].get<double>();
    return lo + st.at("codes")[i].get<double>() / (top - 1) * (hi - lo);
}

std::vector<double> flat(const json& nested) {
    std::vector<double> out;
    if (!nested.is_array()) {
        out.push_back(nested.is_number() ? nested.get<double>() : std::nan(""));
        return out;
    }
    for (const auto& e : nested)
        for (double v : flat(e)) out.push_back(v);
    return out;
}

}  // namespace

TEST_CASE("view of a checkpoint with --layer all: (L, H, T, T) weights of one sequence, every layer and head, and their rollout") {
    attn_test::scratch_dir dir;
    // data/gpt2-tiny/config.json: n_layer 2, n_head 4; 5 ids, one sequence (no batch axis).
    const std::string args = "data/gpt2-tiny/model.safetensors --layer all --ids 1,2,3,4,5";
    auto r = attn_test::run_attn("compute " + args + " --dump weights --compact");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const std::vector<double> w = flat(json::parse(r.out).at("weights"));
    REQUIRE(w.size() == 2 * 4 * 5 * 5);
    for (const std::string cmd : {"view " + args + " -o '" + dir.path + "/v.html'", "compute " + args + " --format html -o '" + dir.path + "/v.html'"}) {
        CAPTURE(cmd);
        r = attn_test::run_attn(cmd);
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const json d = page_data(attn_test::slurp(dir.path + "/v.html"));
        const json& st = d.at("stages")[0];
        CHECK(st.at("name") == "weights");
        CHECK(json{st.at("L"), st.at("B"), st.at("H"), st.at("Tq"), st.at("Tk")} == json{2, 1, 4, 5, 5});
        CHECK(d.at("head_stats").at("rows").size() == 2 * 4);
        // Every weight within half a quantisation step (16 bits over [0, 1]); causal: masked above the diagonal.
        const double half_step = 0.5 / 65534;
        for (std::size_t i = 0; i < w.size(); ++i) {
            const bool above = (i % 5) > (i / 5) % 5;
            CHECK((st.at("codes")[i] == st.at("masked_code")) == above);
            if (!above) CHECK(std::abs(value_of(st, i) - w[i]) <= half_step * 1.01);
        }
        // The rollout, one (T, T) matrix, against plain loops over the weights.
        const json& ro = d.at("rollout");
        REQUIRE(ro.is_object());
        CHECK(json{ro.at("L"), ro.at("B"), ro.at("H"), ro.at("Tq"), ro.at("Tk")} == json{1, 1, 1, 5, 5});
        // Causal: the keys after a query stay unreached (0), which the page marks masked.
        const std::vector<double> want = ref::rollout(w, 2, 4, 5);
        for (std::size_t i = 0; i < want.size(); ++i) {
            const bool above = i % 5 > i / 5;
            CHECK((ro.at("codes")[i] == ro.at("masked_code")) == above);
            if (above) CHECK(want[i] == 0);
            else CHECK(std::abs(value_of(ro, i) - want[i]) <= half_step * 1.01);
        }
    }
}

TEST_CASE("view of one array: rank 3 is (H, Tq, Tk), rank 5 (L, B, H, Tq, Tk) with its rollout") {
    attn_test::scratch_dir dir;
    const std::string d = dir.path;
    // (2, 3, 3): two heads of one sequence, not two batch items.
    write_npy_file(d + "/h.npy", {2, 3, 3}, std::vector<double>(18, 1.0 / 3));
    auto r = attn_test::run_attn("view '" + d + "/h.npy' -o '" + d + "/h.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    json st = page_data(attn_test::slurp(d + "/h.html")).at("stages")[0];
    CHECK(json{st.at("L"), st.at("B"), st.at("H")} == json{1, 1, 2});
    CHECK(page_data(attn_test::slurp(d + "/h.html")).at("rollout").is_null());

    // (2, 1, 1, 10, 10): two layers of one head.
    write_npy_file(d + "/l.npy", {2, 1, 1, 10, 10}, std::vector<double>(200, 0.1));
    r = attn_test::run_attn("view '" + d + "/l.npy' -o '" + d + "/l.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const json page = page_data(attn_test::slurp(d + "/l.html"));
    st = page.at("stages")[0];
    CHECK(json{st.at("L"), st.at("B"), st.at("H"), st.at("Tq"), st.at("Tk")} == json{2, 1, 1, 10, 10});
    const json& ro = page.at("rollout");
    CHECK(json{ro.at("B"), ro.at("Tq"), ro.at("Tk")} == json{1, 10, 10});
    const std::vector<double> want = ref::rollout(std::vector<double>(200, 0.1), 2, 1, 10);
    for (std::size_t i = 0; i < 100; ++i) CHECK(std::abs(value_of(ro, i) - want[i]) <= 0.5 / 65534 * 1.01);
}

namespace {

/// Copies data/gpt2-tiny (checkpoint, config, tokenizer) into `folder`.
void copy_gpt2_tiny(const std::string& folder) {
    std::filesystem::create_directories(folder);
    for (const char* f : {"model.safetensors", "config.json", "tokenizer.json"})
        std::filesystem::copy_file(std::string(ATTN_SOURCE_DIR) + "/data/gpt2-tiny/" + f, folder + "/" + f);
}

}  // namespace

TEST_CASE("view of a checkpoint in a folder whose name is not UTF-8: the page shows it with U+FFFD, as the JSON writer does") {
    attn_test::scratch_dir dir;
    const std::string folder = dir.path + "/bad\xFF<b>";
    copy_gpt2_tiny(folder);
    const std::string args = "'" + folder + "/model.safetensors' --layer all --ids 1,2,3";
    // Before: "[json.exception.type_error.316] invalid UTF-8 byte at index …", exit 1.
    for (const std::string cmd : {"view " + args + " -o '" + dir.path + "/v.html'", "compute " + args + " --format html -o '" + dir.path + "/v.html'"}) {
        CAPTURE(cmd);
        const auto r = attn_test::run_attn(cmd);
        CHECK_MESSAGE(r.code == 0, r.err);
        CHECK(r.err.empty());
        const std::string page = attn_test::slurp(dir.path + "/v.html");
        CHECK(page.find('\xFF') == std::string::npos);
        CHECK(page.find("<dt>checkpoint</dt><dd>" + dir.path + "/bad\xEF\xBF\xBD&lt;b&gt;/model.safetensors</dd>") != std::string::npos);
        CHECK(page.find("<b>") == std::string::npos);
    }
    // A page of two inputs, one of them there: its name in the title, the selector's list
    // and its settings, never as markup.
    const auto r = attn_test::run_attn("view '" + folder + "/model.safetensors' data/gpt2-tiny --layer all --ids 1,2,3 -o '" +
                                       dir.path + "/two.html'");
    CHECK_MESSAGE(r.code == 0, r.err);
    const std::string page = attn_test::slurp(dir.path + "/two.html");
    CHECK(page.find('\xFF') == std::string::npos);
    CHECK(page.find("<b>") == std::string::npos);
    CHECK(page.find("<title>attn view: " + dir.path + "/bad\xEF\xBF\xBD&lt;b&gt;/model.safetensors, data/gpt2-tiny</title>") !=
          std::string::npos);
    CHECK(page_data(page).at("inputs")[0].at("name") == dir.path + "/bad\xEF\xBF\xBD<b>/model.safetensors");
}

TEST_CASE("view shows the settings and the model as labelled fields, not JSON") {
    attn_test::scratch_dir dir;
    const auto r = attn_test::run_attn("view data/gpt2-tiny/model.safetensors --layer all --ids 1,2,3 -o '" + dir.path + "/v.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const std::string page = attn_test::slurp(dir.path + "/v.html");
    // data/gpt2-tiny/config.json: gpt2, 2 layers, hidden 32, 4 heads of 8: scale 1/√8.
    CHECK(page.find("<dl id=\"meta\"><div><dt>model</dt><dd>gpt2</dd></div>"
                    "<div><dt>checkpoint</dt><dd>data/gpt2-tiny/model.safetensors</dd></div>"
                    "<div><dt>layer</dt><dd>all of 2</dd></div><div><dt>hidden size</dt><dd>32</dd></div>"
                    "<div><dt>mask</dt><dd>causal</dd></div><div><dt>scale</dt><dd>0.353553</dd></div>"
                    "<div><dt>softcap</dt><dd>0</dd></div><div><dt>heads</dt><dd>4</dd></div>"
                    "<div><dt>kv heads</dt><dd>4</dd></div><div><dt>past length</dt><dd>0</dd></div>"
                    "<div><dt>dtype</dt><dd>float32</dd></div></dl>") != std::string::npos);
    CHECK(page.find("[\"causal\"]") == std::string::npos);
    CHECK(page.find("{\"arch\"") == std::string::npos);
}

TEST_CASE("--tokens that do not fit the rows: one usage error, exit 2, from plot, compute and view") {
    attn_test::scratch_dir dir;
    const std::string d = dir.path;
    REQUIRE(attn_test::run_attn("compute data/notebook.npz --format npz -o '" + d + "/w.npz'").code == 0);
    // Before: plot exited 1, compute 2, and view wrote a page.
    for (const std::string cmd : {"plot '" + d + "/w.npz' --tokens 'a b c d e' -o '" + d + "/o.png'",
                                  "plot data/notebook.npz --tokens 'a b c d e' -o '" + d + "/o.png'",
                                  "compute data/notebook.npz --tokens 'a b c d e' -o '" + d + "/o.json'",
                                  "view '" + d + "/w.npz' --tokens 'a b c d e' -o '" + d + "/o.html'",
                                  "view data/notebook.npz --tokens 'a b c d e' -o '" + d + "/o.html'"}) {
        CAPTURE(cmd);
        const auto r = attn_test::run_attn(cmd);
        CHECK(r.code == 2);
        CHECK(r.err == "attn: error: --tokens: one token per query (expected 4, got 5)\n");
    }
    const auto r = attn_test::run_attn("view '" + d + "/w.npz' --tokens-kv 'a b' -o '" + d + "/o.html'");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --tokens-kv: one token per key (expected 4, got 2)\n");
    CHECK(!std::filesystem::exists(d + "/o.png"));
    CHECK(!std::filesystem::exists(d + "/o.json"));
    CHECK(!std::filesystem::exists(d + "/o.html"));
}

TEST_CASE("a token of markup stays text in every writer: JSON, CSV, table, HTML page and SVG plot") {
    attn_test::scratch_dir dir;
    const std::string d = dir.path;
    const std::string evil = "</script><img/src=x/onerror=alert(1)>";
    const std::string args = "data/notebook.npz --tokens '" + evil + " b&amp; \"c\" d'";
    auto r = attn_test::run_attn("compute " + args + " --dump weights -o '" + d + "/o.json'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(json::parse(attn_test::slurp(d + "/o.json")).at("tokens") == json{evil, "b&amp;", "\"c\"", "d"});

    // CSV has no token column: indices only, so a token cannot break a row.
    r = attn_test::run_attn("compute " + args + " --format csv");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(r.out.find("script") == std::string::npos);
    CHECK(r.out.find("amp") == std::string::npos);

    // The table is terminal text: the token is printed as it is (control bytes are
    // escaped, tests/io/test_table.cpp), once per axis.
    r = attn_test::run_attn("compute " + args + " --format table");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(r.out.find(evil) != std::string::npos);

    // The page: no tag from the token, every '<' in the data block is \u003c, and the
    // block parses back to the token.
    for (const std::string cmd : {"compute " + args + " --format html -o '" + d + "/v.html'", "view " + args + " -o '" + d + "/v.html'"}) {
        CAPTURE(cmd);
        r = attn_test::run_attn(cmd);
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const std::string page = attn_test::slurp(d + "/v.html");
        CHECK(page.find("<img") == std::string::npos);
        CHECK(page.find("\\u003c/script>\\u003cimg/src=x/onerror=alert(1)>") != std::string::npos);
        CHECK(page_data(page).at("tokens") == json{evil, "b&amp;", "\"c\"", "d"});
    }
    // SVG: cairo draws the labels as glyph outlines, so no text of the token is in the file.
    r = attn_test::run_attn("plot " + args + " --title '" + evil + "' -o '" + d + "/p.svg'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const std::string svg = attn_test::slurp(d + "/p.svg");
    CHECK(svg.rfind("<?xml", 0) == 0);
    CHECK(svg.find("<img") == std::string::npos);
    CHECK(svg.find("script") == std::string::npos);
    CHECK(svg.find("onerror") == std::string::npos);
}

TEST_CASE("view of a batch of token ids that differ labels each batch item with its own tokens") {
    attn_test::scratch_dir dir;
    const std::vector<long long> ids{464, 11, 262, 262, 0, 464};
    std::string data(ids.size() * 8, '\0');
    std::memcpy(data.data(), ids.data(), data.size());  // little-endian int64, as '<i8' says
    attn_test::spit(dir.path + "/ids.npy", io_test::npy_v1("<i8", "(2, 3)", data));
    const auto r = attn_test::run_attn("compute data/gpt2-tiny/model.safetensors --layer 0 --token-ids '" + dir.path +
                                       "/ids.npy' --vocab data/gpt2-tiny/tokenizer.json -o '" + dir.path + "/v.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const json d = page_data(attn_test::slurp(dir.path + "/v.html"));
    // GPT-2's own byte-level labels of these ids (data/gpt2-tiny/tokenizer.json).
    CHECK(d.at("item_tokens") == json{{"The", ",", " the"}, {" the", "!", "The"}});
}

namespace {

/// The (L, B, H, Tq, Tk) of a page's stage.
json dims(const json& st) { return json{st.at("L"), st.at("B"), st.at("H"), st.at("Tq"), st.at("Tk")}; }

}  // namespace

TEST_CASE("view of several INPUTs: one page whose data lists each input, named as given, as its own page holds it") {
    attn_test::scratch_dir dir;
    const std::string d = dir.path;
    const std::string opts = " --layer all --text 'The cat sat'";
    auto r = attn_test::run_attn("view data/gpt2-tiny data/llama-tiny" + opts + " -o '" + d + "/two.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const std::string page = attn_test::slurp(d + "/two.html");
    const json two = page_data(page);
    REQUIRE(two.at("inputs").size() == 2);
    CHECK(!two.contains("stages"));
    CHECK(two.at("inputs")[0].at("name") == "data/gpt2-tiny");
    CHECK(two.at("inputs")[1].at("name") == "data/llama-tiny");
    // Each input's tokens and shapes, as attn compute gives them on its own: GPT-2's 5
    // tokens and Llama's 7 (with <|begin_of_text|>), 2 layers of 4 heads each.
    for (std::size_t k = 0; k < 2; ++k) {
        const std::string input = k == 0 ? "data/gpt2-tiny" : "data/llama-tiny";
        CAPTURE(input);
        r = attn_test::run_attn("compute " + input + opts + " --dump weights --compact");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const json computed = json::parse(r.out);
        const json& in = two.at("inputs")[k];
        const std::size_t T = computed.at("tokens").size();
        CHECK(T == (k == 0 ? 5u : 7u));
        CHECK(in.at("tokens") == computed.at("tokens"));
        CHECK(in.at("stages")[0].at("name") == "weights");
        CHECK(dims(in.at("stages")[0]) == json{2, 1, 4, T, T});
        CHECK(dims(in.at("rollout")) == json{1, 1, 1, T, T});
        CHECK(in.at("head_stats").at("rows").size() == 2 * 4);
        const std::vector<double> w = flat(computed.at("weights"));
        REQUIRE(w.size() == 2 * 4 * T * T);
        for (std::size_t i = 0; i < w.size(); ++i)
            if (in.at("stages")[0].at("codes")[i] != in.at("stages")[0].at("masked_code"))
                CHECK(std::abs(value_of(in.at("stages")[0], i) - w[i]) <= 0.5 / 65534 * 1.01);
        // The input's part of the page is the page of that input alone (same depth, 16 bits).
        r = attn_test::run_attn("view " + input + opts + " -o '" + d + "/one.html'");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        json alone = page_data(attn_test::slurp(d + "/one.html"));
        for (const char* shared : {"lut", "masked_rgb", "hatch_rgb"}) {
            CHECK(alone.at(shared) == two.at(shared));
            alone.erase(shared);
        }
        json part = in;
        part.erase("name");
        CHECK(part == alone);
    }
    // The selector, each input's settings (the second hidden until chosen), both names in the title.
    CHECK(page.find("<label>input <select id=\"input\"></select></label>") != std::string::npos);
    CHECK(page.find("<dl class=\"meta\" data-input=\"0\"><div><dt>model</dt><dd>gpt2</dd></div>") != std::string::npos);
    CHECK(page.find("<dl class=\"meta\" data-input=\"1\" style=\"display:none\"><div><dt>model</dt><dd>llama</dd></div>") !=
          std::string::npos);
    CHECK(page.find("<title>attn view: data/gpt2-tiny, data/llama-tiny</title>") != std::string::npos);

    // One INPUT: no list, no selector, its data at the top as before.
    const std::string one = attn_test::slurp(d + "/one.html");
    CHECK(one.find("id=\"input\"") == std::string::npos);
    CHECK(one.find("<dl id=\"meta\">") != std::string::npos);
    const json alone = page_data(one);
    CHECK(!alone.contains("inputs"));
    CHECK(dims(alone.at("stages")[0]) == json{2, 1, 4, 7, 7});

    // Inputs of different kinds: attn output (.npz of stages) and one array of weights.
    r = attn_test::run_attn("compute data/notebook.npz --mask causal --format npz -o '" + d + "/o.npz'");
    REQUIRE(r.code == 0);
    write_npy_file(d + "/h.npy", {2, 3, 3}, std::vector<double>(18, 1.0 / 3));
    r = attn_test::run_attn("view '" + d + "/o.npz' '" + d + "/h.npy' -o '" + d + "/mixed.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const json mixed = page_data(attn_test::slurp(d + "/mixed.html"));
    CHECK(mixed.at("inputs")[0].at("name") == d + "/o.npz");
    CHECK(dims(mixed.at("inputs")[0].at("stages")[0]) == json{1, 1, 1, 4, 4});
    CHECK(mixed.at("inputs")[1].at("name") == d + "/h.npy");
    CHECK(dims(mixed.at("inputs")[1].at("stages")[0]) == json{1, 1, 2, 3, 3});
}

TEST_CASE("view of several INPUTs: an error names the input it comes from, one line, and writes nothing") {
    attn_test::scratch_dir dir;
    const std::string d = dir.path;
    const std::string out = " -o '" + d + "/v.html'";
    // A checkpoint option both take, wrong for the second (gemma3-tiny has 4 layers, GPT-2's 2):
    // the library's message, named.
    auto r = attn_test::run_attn("view tests/fixtures/checkpoints/gemma3-tiny data/gpt2-tiny --layer 3 --ids 1,2,3" + out);
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: data/gpt2-tiny: --layer: beyond the model's layers (expected 0 to 1 or all, got 3)\n");
    // A message that already names the input is not named twice.
    r = attn_test::run_attn("compute data/notebook.npz --dump output,lse --format npz -o '" + d + "/o.npz'");
    REQUIRE(r.code == 0);
    r = attn_test::run_attn("view data/notebook.npz '" + d + "/o.npz'" + out);
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + d + "/o.npz: no Tq×Tk stage to view (expected weights, scores, scaled, qk or word_weights; found output, lse)\n");
    // --tokens apply to every input; the one they do not fit is named.
    r = attn_test::run_attn("view data/notebook.npz data/seed004.npz --tokens 'a b c d'" + out);
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: data/seed004.npz: --tokens: one token per query (expected 3, got 4)\n");
    r = attn_test::run_attn("view - -" + out);
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: INPUT: standard input can be read once (expected at most one '-', got 2)\n");

    // --max-bytes counts every input: a page each input fits alone, two of them do not.
    write_npy_file(d + "/w.npy", {100, 100}, std::vector<double>(100 * 100, 0.01));
    r = attn_test::run_attn("view '" + d + "/w.npy' --max-bytes 300K" + out);
    CHECK_MESSAGE(r.code == 0, r.err);
    std::filesystem::remove(d + "/v.html");
    r = attn_test::run_attn("view '" + d + "/w.npy' '" + d + "/w.npy' --max-bytes 300K" + out);
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + d + "/w.npy: this view of 2 inputs needs about 390.0 kB for its Tq×Tk stages (weights (100, 100) float64) "
                   "(expected at most --max-bytes 300 KiB; raise --max-bytes or view fewer stages, layers or heads)\n");
    CHECK(!std::filesystem::exists(d + "/v.html"));
}

namespace {

/// The page of `args` (a checkpoint run of several layers) written layer by layer to -o
/// and to stdout, and held (--plot draws from the held weights): the same bytes.
std::string streamed_page(const std::string& args) {
    CAPTURE(args);
    attn_test::scratch_dir dir;
    const auto to_file = attn_test::run_attn("compute " + args + " -o '" + dir.path + "/s.html'");
    REQUIRE_MESSAGE(to_file.code == 0, to_file.err);
    const auto on_stdout = attn_test::run_attn("compute " + args + " --format html");
    REQUIRE_MESSAGE(on_stdout.code == 0, on_stdout.err);
    const auto held = attn_test::run_attn("compute " + args + " --plot '" + dir.path + "/p.png' -o '" + dir.path + "/h.html'");
    REQUIRE_MESSAGE(held.code == 0, held.err);
    const std::string page = attn_test::slurp(dir.path + "/s.html");
    CHECK(on_stdout.out == page);
    CHECK(attn_test::slurp(dir.path + "/h.html") == page);
    // Chunks before the data block, as the layers came: layer 0's stages, then layer 1's.
    CHECK(page.find("class=\"attn-chunk\" data-input=\"0\" data-stage=\"0\" data-layer=\"1\"") <
          page.find("id=\"attn-data\""));
    return page;
}

}  // namespace

TEST_CASE("compute --format html of several layers is written layer by layer: the held page's bytes, each layer over its own range") {
    attn_test::scratch_dir dir;
    for (const std::string model : {"data/gpt2-tiny/model.safetensors --ids 1,2,3,4,5", "data/llama-tiny --ids 3,1,4,1,5,9",
                                    "data/bert-tiny --ids 2,7,1,8", "tests/fixtures/checkpoints/gemma3-tiny --ids 1,5,9,2,7,3,8,4"}) {
        CAPTURE(model);
        const json d = page_data(streamed_page(model + " --layer all"));
        // The stages against the run's own .npz: every cell within half a step of its
        // layer's range (weights over [0, 1]), masked where the score is −∞.
        const std::string npz = dir.path + "/run.npz";
        auto r = attn_test::run_attn("compute " + model + " --layer all --dump weights,scores -o '" + npz + "'");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        const auto arrays = attn::io::read_npz(attn_test::slurp(npz), npz);
        std::size_t ranges_differ = 0;
        for (const json& st : d.at("stages")) {
            const std::string name = st.at("name");
            if (name != "weights" && name != "scores") continue;
            const attn::array* a = nullptr;
            for (const auto& t : arrays)
                if (t.name == name) a = &t.value;
            REQUIRE(a);
            REQUIRE(a->size() == st.at("codes").size());
            const std::size_t L = st.at("L"), per = a->size() / L;
            const double top = st.at("masked_code");
            for (std::size_t l = 0; l < L; ++l) {
                const double lo = st.at("layers")[l][0], hi = st.at("layers")[l][1];
                if (l > 0 && st.at("layers")[l] != st.at("layers")[0]) ++ranges_differ;
                for (std::size_t i = l * per; i < (l + 1) * per; ++i) {
                    const double v = a->value(i);
                    const bool masked = st.at("codes")[i] == top;
                    if (name == "scores") CHECK(masked == !std::isfinite(v));
                    if (masked) {
                        CHECK(v <= 0);  // a weight of a −∞ score is 0
                        continue;
                    }
                    CHECK(std::abs(value_of(st, i) - v) <= 0.5 * (hi - lo) / (top - 1) * 1.01 + 1e-12);
                }
            }
            // The colours span every layer's range.
            for (const json& range : st.at("layers")) {
                CHECK(st.at("lo").get<double>() <= range[0].get<double>());
                CHECK(st.at("hi").get<double>() >= range[1].get<double>());
            }
        }
        CHECK(ranges_differ > 0);  // the scores of each model's layers span different ranges
        CHECK(d.at("rollout").is_object());
        CHECK(d.at("head_stats").at("rows").size() == d.at("stages")[0].at("L").get<std::size_t>() *
                                                           d.at("stages")[0].at("B").get<std::size_t>() *
                                                           d.at("stages")[0].at("H").get<std::size_t>());
    }
    // A list of layers: named on the page, and no rollout (a product that skips blocks).
    const json d = page_data(streamed_page("data/llama-tiny --ids 3,1,4 --layer 1,0"));
    CHECK(d.at("layer_names") == json{0, 1});
    CHECK(d.at("rollout").is_null());
}

TEST_CASE("compute --format html of several layers holds one layer: peak memory at T = 1024, and a failed run leaves no page") {
    attn_test::scratch_dir dir;
    // gemma3-tiny: 4 layers of 4 heads × 1024²: weights and scores float32 and the mask,
    // 36 MiB a layer; held, the layers and their stack passed 288 MiB.
    attn_test::write_cycled_ids(dir.path + "/ids.npy", 1024);
    const std::string run = "compute tests/fixtures/checkpoints/gemma3-tiny --layer all --token-ids '" + dir.path + "/ids.npy' --format html";
    const auto m = attn_test::run_attn_measured(run + " -o '" + dir.path + "/v.html'", attn_test::small_quarantine);
    REQUIRE_MESSAGE(m.code == 0, "the run failed");
    CHECK(m.peak_kb < attn_test::peak_bound_mb(100) * 1024);  // KiB
    CHECK(attn_test::slurp(dir.path + "/v.html").rfind("<!DOCTYPE html>", 0) == 0);
    // `ulimit -f` past the first layer's chunks: the destination as it was, no temporary.
    const std::string out = dir.path + "/out/v.html";
    std::filesystem::create_directory(dir.path + "/out");
    attn_test::spit(out, "before");
    const auto r = attn_test::run_attn(run + " -o '" + out + "'", "", "trap '' XFSZ && ulimit -f 2000 && ");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + out + ": cannot write output (File too large)\n");
    CHECK(attn_test::slurp(out) == "before");
    CHECK(std::distance(std::filesystem::directory_iterator(dir.path + "/out"), std::filesystem::directory_iterator{}) == 1);
}

TEST_CASE("attn view of a checkpoint's layers streams: compute --format html's page, titled by its input, holding one layer") {
    attn_test::scratch_dir dir;
    attn_test::write_cycled_ids(dir.path + "/ids.npy", 1024);
    const std::string model = "tests/fixtures/checkpoints/gemma3-tiny";
    const std::string run = model + " --layer all --token-ids '" + dir.path + "/ids.npy'";
    const auto m = attn_test::run_attn_measured("view " + run + " -o '" + dir.path + "/v.html'", attn_test::small_quarantine);
    REQUIRE_MESSAGE(m.code == 0, "the run failed");
    // As compute's page above: 36 MiB a layer, 4 layers; held, the view took 317 MB.
    CHECK(m.peak_kb < attn_test::peak_bound_mb(100) * 1024);  // KiB
    // The page compute writes held (--plot holds it), titled by the input instead of "attn compute".
    const auto held = attn_test::run_attn("compute " + run + " --format html --plot '" + dir.path + "/p.png' -o '" + dir.path + "/h.html'");
    REQUIRE_MESSAGE(held.code == 0, held.err);
    std::string want = attn_test::slurp(dir.path + "/h.html");
    for (std::size_t at = want.find("attn view: attn compute"); at != std::string::npos; at = want.find("attn view: attn compute", at))
        want.replace(at + 11, 12, model);
    CHECK(attn_test::slurp(dir.path + "/v.html") == want);
    // A --tokens that does not fit is refused at the first layer, and writes nothing.
    const auto bad = attn_test::run_attn("view " + model + " --layer all --ids 1,2,3 --tokens 'a b' -o '" + dir.path + "/bad.html'");
    CHECK(bad.code == 2);
    CHECK(bad.err == "attn: error: --tokens: one token per query (expected 3, got 2)\n");
    CHECK_FALSE(std::filesystem::exists(dir.path + "/bad.html"));
}

namespace {

/// (L, B, H, T, T)-shaped weights (any leading axes) of causal rows: row i of each block is
/// i + 1 values 1, 2, …, i + 1 normalised to sum 1, then exact zeros (masked).
std::vector<double> causal_rows(std::size_t blocks, std::size_t T) {
    std::vector<double> w(blocks * T * T, 0.0);
    for (std::size_t k = 0; k < blocks; ++k)
        for (std::size_t i = 0; i < T; ++i) {
            const double sum = static_cast<double>((i + 1) * (i + 2) / 2) + static_cast<double>(k);
            for (std::size_t j = 0; j <= i; ++j)
                w[(k * T + i) * T + j] = (static_cast<double>(j + 1) + (j == 0 ? static_cast<double>(k) : 0.0)) / sum;
        }
    return w;
}

/// A float32 .npy of causal_rows, written a block at a time.
void write_f32_npy(const std::string& path, const attn::shape_t& shape) {
    std::size_t blocks = 1;
    for (std::size_t k = 0; k + 2 < shape.size(); ++k) blocks *= shape[k];
    const std::size_t T = shape.back();
    attn::array header;
    header.type = attn::dtype::f4;
    header.shape = shape;
    std::ofstream f(path, std::ios::binary);
    attn::io::write_npy_header(f, header);
    for (std::size_t k = 0; k < blocks; ++k) {
        const std::vector<double> w = causal_rows(1, T);
        std::vector<float> v(w.begin(), w.end());
        f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
    }
    REQUIRE(f.good());
}

}  // namespace

TEST_CASE("view of one .npy file reads it in pieces: the held page's bytes, ranks 2 to 5, float32 and float64, pieces across blocks and layers") {
    attn_test::scratch_dir dir;
    struct one {
        attn::shape_t shape;
        bool single;
        std::string options;
    };
    // (2, 1, 2, 600, 600) float64 is 11.5 MB: pieces of 4 MiB end inside blocks and layers.
    for (const one& c : {one{{2, 1, 2, 5, 5}, true, ""}, one{{3, 2, 2, 4, 4}, false, ""}, one{{1, 2, 5, 5}, true, ""},
                         one{{2, 3, 3}, false, " --tokens 'a b c'"}, one{{4, 4}, true, " --tokens 'w x y z'"},
                         one{{2, 1, 2, 600, 600}, false, ""}}) {
        CAPTURE(attn::shape_string(c.shape));
        std::size_t blocks = 1;
        for (std::size_t k = 0; k + 2 < c.shape.size(); ++k) blocks *= c.shape[k];
        const std::vector<double> w = causal_rows(blocks, c.shape.back());
        const std::string npy = dir.path + "/w.npy";
        {
            std::ofstream f(npy, std::ios::binary);
            if (c.single) {
                const std::vector<float> v(w.begin(), w.end());
                attn::io::write_npy(f, attn::array::from<float>(c.shape, v.data()));
            } else {
                attn::io::write_npy(f, attn::array::from<double>(c.shape, w.data()));
            }
        }
        auto r = attn_test::run_attn("view '" + npy + "'" + c.options + " -o '" + dir.path + "/s.html'");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        // Standard input is read whole: the held page, titled "<stdin>".
        r = attn_test::run_attn("view -" + c.options + " -o '" + dir.path + "/h.html'", attn_test::slurp(npy));
        REQUIRE_MESSAGE(r.code == 0, r.err);
        std::string held = attn_test::slurp(dir.path + "/h.html");
        for (std::size_t at = held.find("&lt;stdin&gt;"); at != std::string::npos; at = held.find("&lt;stdin&gt;", at))
            held.replace(at, 13, npy);
        CHECK(attn_test::slurp(dir.path + "/s.html") == held);
        const json d = page_data(held);
        CHECK(d.at("rollout").is_null() == (c.shape.size() < 5));
        CHECK(d.at("head_stats").at("rows").size() == blocks);
    }
}

TEST_CASE("view of a large .npy of weights holds a block, not the file: peak memory, and a block over --max-bytes refused by plan") {
    attn_test::scratch_dir dir;
    // 64 MiB of float32 weights, 16 heads of 1024²: held, the view took 244 MB (the file,
    // its array, the masked flags, a float64 copy for the statistics, the page's codes).
    const std::string npy = dir.path + "/w.npy", page = dir.path + "/v.html";
    // Written by a child process, so that this one (which the measured run is forked from,
    // and whose peak the fork's RSS carries) never holds the blocks it writes.
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        write_f32_npy(npy, {1, 16, 1024, 1024});
        _exit(0);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    const auto m = attn_test::run_attn_measured("view '" + npy + "' -o '" + page + "'", attn_test::small_quarantine);
    REQUIRE_MESSAGE(m.code == 0, "the run failed");
    CHECK(m.peak_kb < attn_test::peak_bound_mb(64) * 1024);  // KiB
    const json d = page_data(attn_test::slurp(page));
    REQUIRE(d.at("stages").size() == 1);
    const json& st = d.at("stages")[0];
    CHECK(st.at("H") == 16);
    CHECK(d.at("head_stats").at("rows").size() == 16);
    // Head 15, row 1: 1/3, 2/3, then masked.
    const std::size_t base = (15 * 1024 + 1) * 1024;
    CHECK(std::abs(value_of(st, base) - 1.0 / 3) < 1e-4);
    CHECK(std::abs(value_of(st, base + 1) - 2.0 / 3) < 1e-4);
    CHECK(st.at("codes")[base + 2] == st.at("masked_code"));

    // One 4096² head is one block: 16 Mi float32 cells and their visible flags, refused
    // before any is read when --max-bytes cannot hold it (the array itself, 64 MiB, can).
    write_f32_npy(npy, {1, 1, 4096, 4096});
    const auto r = attn_test::run_attn("view '" + npy + "' --max-bytes 70M -o '" + page + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: this view needs about 90.2 MB for its Tq×Tk stages (weights (1, 1, 4096, 4096) float32) "
                   "(expected at most --max-bytes 70 MiB; raise --max-bytes or view fewer stages, layers or heads)\n");
}

TEST_CASE("view draws word_weights' causally masked cells masked, as the weights' are") {
    attn_test::scratch_dir dir;
    const auto r = attn_test::run_attn("view data/llama-tiny --layer 0 --text 'The capital of France is' --words -o '" + dir.path + "/w.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const json d = page_data(attn_test::slurp(dir.path + "/w.html"));
    const json* words = nullptr;
    for (const json& st : d.at("stages"))
        if (st.at("name") == "word_weights") words = &st;
    REQUIRE(words);
    const std::size_t W = words->at("Tq"), H = words->at("H");
    REQUIRE(W == 6);
    std::size_t above = 0;
    for (std::size_t h = 0; h < H; ++h)
        for (std::size_t i = 0; i < W; ++i)
            for (std::size_t j = 0; j < W; ++j) {
                const bool masked = words->at("codes")[(h * W + i) * W + j] == words->at("masked_code");
                CHECK(masked == (j > i));  // the causal mask: no word sees a later one
                above += masked;
            }
    CHECK(above == H * W * (W - 1) / 2);
}

TEST_CASE("view shows the text the tokens came from, escaped, and compute's meta carries it") {
    attn_test::scratch_dir dir;
    const std::string text = "The <b>cat</b> & sat";
    for (const std::string layer : {"0", "all"}) {  // held, and streamed layer by layer
        CAPTURE(layer);
        const auto r = attn_test::run_attn("view data/gpt2-tiny --layer " + layer + " --text '" + text + "' -o '" + dir.path + "/t.html'");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        CHECK(attn_test::slurp(dir.path + "/t.html").find("<div class=\"text\"><dt>text</dt><dd>The &lt;b&gt;cat&lt;/b&gt; &amp; sat</dd></div></dl>") !=
              std::string::npos);
    }
    // Several texts: each, numbered as the batch items are.
    auto r = attn_test::run_attn("view data/gpt2-tiny --layer 0 --text 'one two' --text 'three' -o '" + dir.path + "/t.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(attn_test::slurp(dir.path + "/t.html").find("<div class=\"text\"><dt>text 0</dt><dd>one two</dd></div><div class=\"text\"><dt>text 1</dt><dd>three</dd></div>") !=
          std::string::npos);
    // attn output viewed later shows it too: meta.model.text.texts.
    r = attn_test::run_attn("compute data/gpt2-tiny --layer 0 --text '" + text + "' -o '" + dir.path + "/o.json'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(json::parse(attn_test::slurp(dir.path + "/o.json")).at("meta").at("model").at("text").at("texts") == json{text});
    r = attn_test::run_attn("view '" + dir.path + "/o.json' -o '" + dir.path + "/o.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(attn_test::slurp(dir.path + "/o.html").find("<dt>text</dt><dd>The &lt;b&gt;cat&lt;/b&gt; &amp; sat</dd>") != std::string::npos);
}
