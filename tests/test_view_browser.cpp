// attn view's page in a real browser: Debian's chromium, headless, loads the
// page from a file with a #test= fragment; the page's self-test (selfTest in
// src/io/html/view_tests.js.inc) switches the head, reads a cell's pixel from the heatmap
// canvas and the hover text, and reports as JSON in #test-result, which --dump-dom
// prints. The expected colours come from io::colormap (plot.hpp), the weights from what
// the test wrote. Budget for the T=4096 page: the whole browser run within 60 s. The whole
// model's page is timed in real time instead (browse_timed: the page logs its numbers on
// the console and closes itself).
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "attn/io/plot.hpp"
#include "cli_util.hpp"
#include "reference.hpp"
#include "scratch_dir.hpp"

namespace {

using nlohmann::json;

/// Without chromium the test exits 77, which ctest reports as skipped (SKIP_RETURN_CODE,
/// tests/CMakeLists.txt); scripts/setup.sh installs it, so CI runs every test here.
void require_chromium() {
    if (std::system("test -x /usr/bin/chromium") == 0) return;
    std::fprintf(stderr, "skipped: /usr/bin/chromium is not installed (bash scripts/setup.sh installs it)\n");
    std::fflush(stderr);
    std::_Exit(77);
}

/// Runs chromium on `page` with the self-test `spec`; returns the JSON it reported.
json browse(const std::string& page, const json& spec, const std::string& profile, double* seconds = nullptr) {
    std::string fragment;
    for (char c : spec.dump()) {
        char buf[4];
        std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
        fragment += std::isalnum(static_cast<unsigned char>(c)) ? std::string(1, c) : std::string(buf);
    }
    const std::string out = profile + ".dom";
    // Every network name resolves nowhere: a request the page made would fail, and the
    // page would report it (it counts its resource loads too).
    const std::string cmd = "/usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
                            "--disable-background-networking --disable-component-update --disable-sync "
                            "--host-resolver-rules='MAP * ~NOTFOUND' --user-data-dir='" + profile +
                            "' --virtual-time-budget=30000 --dump-dom 'file://" + page + "#test=" + fragment + "' >'" + out +
                            "' 2>/dev/null";
    const auto t0 = std::chrono::steady_clock::now();
    const int status = std::system(cmd.c_str());
    if (seconds) *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    REQUIRE(status == 0);
    const std::string dom = attn_test::slurp(out);
    const std::string open = "<pre id=\"test-result\">";
    const std::size_t at = dom.find(open);
    REQUIRE_MESSAGE(at != std::string::npos, "no #test-result in the page's DOM");
    const std::string escaped = dom.substr(at + open.size(), dom.find("</pre>", at) - at - open.size());
    REQUIRE_MESSAGE(!escaped.empty(), "the page's self-test did not run");
    // --dump-dom writes text as HTML: &amp; &lt; &gt; (and &nbsp;, which JSON.stringify never makes).
    std::string text;
    for (std::size_t i = 0; i < escaped.size(); ++i) {
        bool entity = false;
        for (const auto& [name, c] : {std::pair{"&amp;", '&'}, std::pair{"&lt;", '<'}, std::pair{"&gt;", '>'}})
            if (escaped.compare(i, std::strlen(name), name) == 0) {
                text += c;
                i += std::strlen(name) - 1;
                entity = true;
                break;
            }
        if (!entity) text += escaped[i];
    }
    return json::parse(text);
}

/// Runs chromium on `page` in real time (no --virtual-time-budget: under it performance.now()
/// stands still while a task runs and jumps over timers and frames, so it cannot time a
/// switch) with the timing self-test `spec`; the page logs "attn-timing {…}" on the console,
/// which --enable-logging=stderr prints, and closes its window, which ends chromium (or
/// `timeout` does, after 120 s). Returns the JSON it logged.
json browse_timed(const std::string& page, const json& spec, const std::string& profile, double* seconds) {
    std::string fragment;
    for (char c : spec.dump()) {
        char buf[4];
        std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
        fragment += std::isalnum(static_cast<unsigned char>(c)) ? std::string(1, c) : std::string(buf);
    }
    const std::string log = profile + ".log";
    const std::string cmd = "timeout 120 /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
                            "--disable-background-networking --disable-component-update --disable-sync "
                            "--host-resolver-rules='MAP * ~NOTFOUND' --user-data-dir='" + profile +
                            "' --enable-logging=stderr --v=0 'file://" + page + "#test=" + fragment + "' >/dev/null 2>'" + log + "'";
    const auto t0 = std::chrono::steady_clock::now();
    const int status = std::system(cmd.c_str());
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    REQUIRE_MESSAGE(status == 0, "chromium did not close (the page's timing self-test did not finish within 120 s)");
    const std::string text = attn_test::slurp(log), mark = "\"attn-timing ";
    const std::size_t at = text.find(mark);
    REQUIRE_MESSAGE(at != std::string::npos, "no attn-timing line on chromium's console");
    const std::size_t begin = at + mark.size(), end = text.find("\", source: ", begin);
    REQUIRE(end != std::string::npos);
    return json::parse(text.substr(begin, end - begin));
}

/// Writes an (L, 1, H, T, T) float32 .npy of causal attention weights: row i of each head
/// is i + 1 uniform random numbers normalised to sum 1, then zeros (masked). Streamed a
/// row at a time (24 × 14 × 512² floats are 352 MB).
void write_causal_weights(const std::string& path, std::size_t L, std::size_t H, std::size_t T) {
    std::ofstream f(path, std::ios::binary);
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(L) + ", 1, " +
                       std::to_string(H) + ", " + std::to_string(T) + ", " + std::to_string(T) + "), }";
    while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
    dict += '\n';
    const unsigned char head[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<unsigned char>(dict.size() & 0xff),
                                    static_cast<unsigned char>(dict.size() >> 8)};
    f.write(reinterpret_cast<const char*>(head), sizeof head);
    f << dict;
    std::uint64_t state = 0x9E3779B97F4A7C15ull;
    std::vector<float> row(T);
    for (std::size_t k = 0; k < L * H; ++k)
        for (std::size_t i = 0; i < T; ++i) {
            double sum = 0;
            for (std::size_t j = 0; j <= i; ++j) {
                state = state * 6364136223846793005ull + 1442695040888963407ull;
                row[j] = static_cast<float>((state >> 40) + 1) / 16777217.0f;  // (0, 1]
                sum += row[j];
            }
            for (std::size_t j = 0; j < T; ++j) row[j] = j <= i ? static_cast<float>(row[j] / sum) : 0.0f;
            f.write(reinterpret_cast<const char*>(row.data()), static_cast<std::streamsize>(T * sizeof(float)));
        }
    REQUIRE(f.good());
}

json rgb(attn::io::rgb8 c) { return json{c.r, c.g, c.b}; }
json lut(double w) { return rgb(attn::io::colormap(std::lround(w * 255) / 255.0)); }

void write_weights(const std::string& path, attn::shape_t shape, const std::vector<double>& v) {
    std::ofstream f(path, std::ios::binary);
    attn::io::write_npy(f, attn::array::from<double>(shape, v.data()));
}

}  // namespace

TEST_CASE("view in chromium: loads with no network and no error, the head selector recolours a known cell, hover shows its weight") {
    require_chromium();
    attn_test::scratch_dir dir;
    // Two heads of 3×3 weights; cell (1, 0) is 0.25 in head 0 and 0.75 in head 1; (0, 2) is masked (0).
    write_weights(dir.path + "/w.npy", {2, 3, 3}, {1, 0, 0, 0.25, 0.75, 0, 0.2, 0.3, 0.5,  //
                                                   1, 0, 0, 0.75, 0.25, 0, 0.1, 0.6, 0.3});
    auto r = attn_test::run_attn("view '" + dir.path + "/w.npy' --tokens 'a b c' -o '" + dir.path + "/w.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const std::string page = attn_test::slurp(dir.path + "/w.html");
    CHECK(page.find("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; "
                    "style-src 'unsafe-inline'; img-src data:\">") != std::string::npos);
    CHECK(page.find("http://") == std::string::npos);
    CHECK(page.find("https://") == std::string::npos);
    CHECK(page.find(" src=") == std::string::npos);

    json got = browse(dir.path + "/w.html", {{"head", 1}, {"row", 1}, {"col", 0}}, dir.path + "/profile");
    CAPTURE(got.dump());
    CHECK(got.at("errors") == json::array());
    CHECK(got.at("resources") == 0);
    CHECK(got.at("before") == lut(0.25));
    CHECK(got.at("after") == lut(0.75));
    CHECK(got.at("hover") == "query 1 \"b\" → key 0 \"a\": weights 0.7500");
    CHECK(got.at("stats_rows") == 2);
    // A masked cell is the neutral grey of attn plot, in every head.
    got = browse(dir.path + "/w.html", {{"head", 0}, {"row", 0}, {"col", 2}}, dir.path + "/profile");
    CHECK(got.at("before") == rgb(attn::io::masked_color));
    CHECK(got.at("hover") == "query 0 \"a\" → key 2 \"c\": weights masked");

    // The check can fail: the same page with an image from the network added reports it.
    std::string tampered = page;
    tampered.insert(tampered.rfind("</body>"), "<img src=\"http://example.com/a.png\">");
    attn_test::spit(dir.path + "/t.html", tampered);
    got = browse(dir.path + "/t.html", {{"row", 0}, {"col", 0}}, dir.path + "/profile");
    CHECK(got.at("errors") == json{"CSP blocked http://example.com/a.png (img-src)"});
}

TEST_CASE("view in chromium: a computed page shows the score before softmax on hover") {
    require_chromium();
    attn_test::scratch_dir dir;
    const std::string args = "data/notebook.npz --mask causal --tokens 'my name is Aj'";
    auto r = attn_test::run_attn("compute " + args + " --format html -o '" + dir.path + "/n.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    // The numbers the page must show: those attn computes (the attention itself is
    // checked against the references elsewhere; this checks what the page displays).
    r = attn_test::run_attn("compute " + args + " --dump scores,weights");
    REQUIRE(r.code == 0);
    const json doc = json::parse(r.out);
    char want[160];
    std::snprintf(want, sizeof want, "query 1 \"name\" → key 0 \"my\": weights %.4f, score %.4f",
                  doc.at("weights")[1][0].get<double>(), doc.at("scores")[1][0].get<double>());
    const json got = browse(dir.path + "/n.html", {{"row", 1}, {"col", 0}}, dir.path + "/profile");
    CAPTURE(got.dump());
    CHECK(got.at("errors") == json::array());
    CHECK(got.at("hover") == want);
    // A masked cell's score is −∞.
    CHECK(browse(dir.path + "/n.html", {{"row", 0}, {"col", 3}}, dir.path + "/profile").at("hover") ==
          "query 0 \"my\" → key 3 \"Aj\": weights masked, score −∞ (masked)");
}

TEST_CASE("view in chromium: a T=4096 page loads within the budget") {
    require_chromium();
    attn_test::scratch_dir dir;
    const std::size_t T = 4096;
    std::vector<double> w(T * T, 0.0);
    for (std::size_t i = 0; i < T; ++i)
        for (std::size_t j = 0; j <= i; ++j) w[i * T + j] = 1.0 / static_cast<double>(i + 1);  // causal, uniform
    write_weights(dir.path + "/big.npy", {T, T}, w);
    auto r = attn_test::run_attn("view '" + dir.path + "/big.npy' -o '" + dir.path + "/big.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    double seconds = 0;
    const json got = browse(dir.path + "/big.html", {{"row", 0}, {"col", 0}}, dir.path + "/profile", &seconds);
    CAPTURE(got.dump());
    CHECK(got.at("errors") == json::array());
    // The overview pools 4×4 cells per pixel (4096 → 1024), averaging the unmasked ones:
    // rows 0..3, cols 0..3 hold 1, ½ ½, ⅓ ⅓ ⅓, ¼ ¼ ¼ ¼ — 4 over 10 cells.
    CHECK(got.at("before") == lut(0.4));
    CHECK(seconds < 60);
}

TEST_CASE("view in chromium: layers of (L, B, H, Tq, Tk) weights, the mean of heads, a grid click and the rollout layer") {
    require_chromium();
    attn_test::scratch_dir dir;
    // L = 2, B = 1, H = 2, T = 3: HF output_attentions stacked. Zero weights count as masked.
    const std::vector<double> w = {1, 0, 0, 0.5, 0.5, 0, 0.2, 0.3, 0.5,  1, 0, 0, 0.9, 0.1, 0, 0.6, 0.2, 0.2,  //
                                   1, 0, 0, 0.3, 0.7, 0, 0.1, 0.1, 0.8,  1, 0, 0, 0.6, 0.4, 0, 0.4, 0.4, 0.2};
    write_weights(dir.path + "/att.npy", {2, 1, 2, 3, 3}, w);
    auto r = attn_test::run_attn("view '" + dir.path + "/att.npy' -o '" + dir.path + "/att.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const std::string page = dir.path + "/att.html";

    // Layer 1, head 1 through the selectors; then a click on the grid's thumbnail of layer 0, head 1.
    json got = browse(page, {{"layer", 1}, {"head", 1}, {"row", 1}, {"col", 0}, {"grid", {0, 1}}}, dir.path + "/profile");
    CAPTURE(got.dump());
    CHECK(got.at("errors") == json::array());
    CHECK(got.at("layers") == json{"layer 0", "layer 1", "rollout"});
    CHECK(got.at("before") == lut(0.5));
    CHECK(got.at("after") == lut(0.6));
    CHECK(got.at("where") == "weights · layer 1 · head 1");
    CHECK(got.at("hover") == "query 1 \"1\" → key 0 \"0\": weights 0.6000");
    CHECK(got.at("grid_where") == "weights · layer 0 · head 1");
    CHECK(got.at("grid_colour") == lut(0.9));
    CHECK(got.at("stats_rows") == 4);

    CHECK(got.at("shown") == json{"heatmap"});

    // The mean of the heads: (0.5 + 0.9) / 2 at layer 0; and the line view draws it without error.
    got = browse(page, {{"head", -1}, {"mode", "lines"}, {"row", 1}, {"col", 0}}, dir.path + "/profile");
    CHECK(got.at("errors") == json::array());
    CHECK(got.at("shown") == json{"lines"});
    CHECK(got.at("after") == lut(0.7));
    CHECK(got.at("hover") == "query 1 \"1\" → key 0 \"0\": weights 0.7000");
    CHECK(got.at("where") == "weights · layer 0 · mean of 2 heads");

    // The rollout, one more layer: its value for query 2, key 1 from the naive product.
    const std::vector<double> rollout = ref::rollout(w, 2, 2, 3);
    char want[120];
    std::snprintf(want, sizeof want, "query 2 \"2\" → key 1 \"1\": rollout %.4f", rollout[2 * 3 + 1]);
    got = browse(page, {{"layer", 2}, {"row", 2}, {"col", 1}}, dir.path + "/profile");
    CAPTURE(got.dump());
    CHECK(got.at("errors") == json::array());
    CHECK(got.at("after") == lut(rollout[2 * 3 + 1]));
    CHECK(got.at("hover") == want);
    CHECK(got.at("where") == "rollout of 2 layers (Abnar & Zuidema 2020) · all heads");
}

TEST_CASE("view in chromium: each layer's codes over its own range, coloured over the stage's range across layers") {
    require_chromium();
    attn_test::scratch_dir dir;
    // scores of 2 layers, 1 head, T = 3: layer 0 spans [0, 1], layer 1 [0, 10]. Each layer is
    // quantised over its own range; the colours span [0, 10] for both.
    const std::vector<double> scores = {0, 0.25, 0.5, 0.75, 1, 0.1, 0.2, 0.3, 0.4,  //
                                        0, 10, 5, 2.5, 7.5, 1, 2, 3, 4};
    const std::string npz = dir.path + "/scores.npz";
    {
        std::ofstream f(npz, std::ios::binary);
        attn::io::write_npz(f, {{"scores", attn::array::from<double>({2, 1, 1, 3, 3}, scores.data())}});
    }
    auto r = attn_test::run_attn("view '" + npz + "' -o '" + dir.path + "/scores.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const json got = browse(dir.path + "/scores.html", {{"layer", 1}, {"row", 1}, {"col", 0}}, dir.path + "/profile");
    CAPTURE(got.dump());
    CHECK(got.at("errors") == json::array());
    CHECK(got.at("before") == lut(0.75 / 10));  // layer 0: 0.75 on the scale of both layers
    CHECK(got.at("after") == lut(2.5 / 10));
    CHECK(got.at("hover") == "query 1 \"1\" → key 0 \"0\": scores 2.500");
    CHECK(got.at("where") == "scores · layer 1 · head 0");
}

TEST_CASE("view in chromium: a checkpoint run of listed layers names them in the selector and the caption") {
    require_chromium();
    attn_test::scratch_dir dir;
    // --layer 1,3 (docs/design.md §5.4): index 1 of the layer axis is the model's layer 3; no
    // rollout, whose product would skip layers 0 and 2.
    const auto r = attn_test::run_attn("view tests/fixtures/checkpoints/gemma3-tiny --layer 1,3 --ids 1,5,9,2 -o '" + dir.path +
                                       "/list.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const json got = browse(dir.path + "/list.html", {{"layer", 1}, {"head", 0}, {"row", 1}, {"col", 0}}, dir.path + "/profile");
    CAPTURE(got.dump());
    CHECK(got.at("errors") == json::array());
    CHECK(got.at("layers") == json{"layer 1", "layer 3"});
    CHECK(got.at("where") == "weights · layer 3 · head 0");
}

TEST_CASE("view in chromium: a colour bar with the stage's range, long rotated labels inside the canvas, labelled head-stats axes") {
    require_chromium();
    attn_test::scratch_dir dir;
    // Weights and scores of 3 tokens; the scores run from −2 to 3 (no −∞: nothing masked).
    const std::vector<double> scores = {-2, 0, 1, 3, 0.5, -1, 2, 1, 0};
    std::vector<double> weights(9);
    for (int i = 0; i < 3; ++i) {
        double sum = 0;
        for (int j = 0; j < 3; ++j) sum += std::exp(scores[i * 3 + j]);
        for (int j = 0; j < 3; ++j) weights[i * 3 + j] = std::exp(scores[i * 3 + j]) / sum;
    }
    {
        std::ofstream f(dir.path + "/s.npz", std::ios::binary);
        attn::io::write_npz(f, {{"weights", attn::array::from<double>({3, 3}, weights.data())},
                                {"scores", attn::array::from<double>({3, 3}, scores.data())}});
    }
    // Full-width letters are about twice as wide as Latin ones: 20 of them are wider than
    // the page's former fixed 90-px label margin.
    std::string wide;
    for (int k = 0; k < 20; ++k) wide += "\xEF\xBC\xB7";  // U+FF37 FULLWIDTH LATIN CAPITAL LETTER W
    const std::string tokens = wide + " b " + std::string(60, 'x');
    auto r = attn_test::run_attn("view '" + dir.path + "/s.npz' --tokens '" + tokens + "' -o '" + dir.path + "/s.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);

    json got = browse(dir.path + "/s.html", {{"row", 0}, {"col", 0}}, dir.path + "/profile");
    CAPTURE(got.dump());
    CHECK(got.at("errors") == json::array());
    // Weights: 0 to 1, the top of the bar colormap(1), the bottom colormap(0).
    CHECK(got.at("bar_ticks") == json{"0", "0.2", "0.4", "0.6", "0.8", "1"});
    CHECK(got.at("bar_top") == lut(1));
    CHECK(got.at("bar_bottom") == lut(0));
    // Every label inside the canvas.
    const json& box = got.at("labels");
    CHECK(box.at("minX").get<double>() >= 0);
    CHECK(box.at("minY").get<double>() >= 0);
    CHECK(box.at("maxX").get<double>() <= got.at("canvas")[0].get<double>());
    CHECK(box.at("maxY").get<double>() <= got.at("canvas")[1].get<double>());
    CHECK(got.at("stats_axes") == json{"head", "statistic (mean over query rows)"});
    CHECK(got.at("stats_caption").get<std::string>().rfind("one row per head", 0) == 0);

    // Scores: their own range, −2 to 3.
    got = browse(dir.path + "/s.html", {{"stage", 1}, {"row", 0}, {"col", 0}}, dir.path + "/profile");
    CHECK(got.at("errors") == json::array());
    CHECK(got.at("bar_ticks") == json{"-2", "-1", "0", "1", "2", "3"});
}

TEST_CASE("view in chromium: a page of two INPUTs switches to the second input's tokens, shapes and settings, keeping layer and head") {
    require_chromium();
    attn_test::scratch_dir dir;
    const std::string opts = " --layer all --text 'The cat sat'";
    auto r = attn_test::run_attn("view data/gpt2-tiny data/llama-tiny" + opts + " -o '" + dir.path + "/two.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    // What each input's view must show: attn compute of that input alone, (L, H, T, T) weights.
    json gpt2, llama;
    for (auto [input, doc] : {std::pair{"data/gpt2-tiny", &gpt2}, std::pair{"data/llama-tiny", &llama}}) {
        r = attn_test::run_attn(std::string("compute ") + input + opts + " --dump weights --compact");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        *doc = json::parse(r.out);
    }
    REQUIRE(gpt2.at("tokens").size() == 5);
    REQUIRE(llama.at("tokens").size() == 7);
    // Layer 1, head 2, query 3 → key 2 of Llama: " c" → "he" (its own tokenizer's pieces), 0.53.
    const double w = llama.at("weights")[1][2][3][2].get<double>();
    CHECK(w > 0.1);
    char want[160];
    std::snprintf(want, sizeof want, "query 3 %s → key 2 %s: weights %.4f", llama.at("tokens")[3].dump().c_str(),
                  llama.at("tokens")[2].dump().c_str(), w);
    const auto check_llama = [&](const json& got) {
        CAPTURE(got.dump());
        CHECK(got.at("errors") == json::array());
        CHECK(got.at("inputs") == json{"data/gpt2-tiny", "data/llama-tiny"});
        CHECK(got.at("dims") == json{2, 1, 4, 7, 7});
        CHECK(got.at("where") == "data/llama-tiny · weights · layer 1 · head 2");
        CHECK(got.at("hover").get<std::string>().rfind(want, 0) == 0);  // then ", score …"
        CHECK(got.at("after") == lut(w));
        CHECK(got.at("stats_rows") == 8);
        REQUIRE(got.at("meta").size() == 1);
        CHECK(got.at("meta")[0].get<std::string>().rfind("modelllamacheckpointdata/llama-tiny/", 0) == 0);
    };

    // The page opens on the first input (GPT-2's layer 0, head 0), then the input selector first.
    json got = browse(dir.path + "/two.html", {{"input", 1}, {"layer", 1}, {"head", 2}, {"row", 3}, {"col", 2}}, dir.path + "/profile");
    CHECK(got.at("before") == lut(gpt2.at("weights")[0][0][3][2].get<double>()));
    check_llama(got);
    // Layer 1 and head 2 chosen on GPT-2 stay chosen when the input changes.
    got = browse(dir.path + "/two.html",
                 {{"order", {"layer", "head", "input"}}, {"layer", 1}, {"head", 2}, {"input", 1}, {"row", 3}, {"col", 2}},
                 dir.path + "/profile");
    check_llama(got);
    // So does the rollout.
    got = browse(dir.path + "/two.html", {{"order", {"layer", "input"}}, {"layer", 2}, {"input", 1}, {"row", 0}, {"col", 0}},
                 dir.path + "/profile");
    CHECK(got.at("errors") == json::array());
    CHECK(got.at("where") == "data/llama-tiny · rollout of 2 layers (Abnar & Zuidema 2020) · all heads");

    // The check can fail: a page whose selector does not switch the data shows GPT-2's tokens.
    std::string page = attn_test::slurp(dir.path + "/two.html");
    const std::string switching = "state.input = k; D = INPUTS[k];";
    REQUIRE(page.find(switching) != std::string::npos);
    page.replace(page.find(switching), switching.size(), "state.input = k; D = INPUTS[0];");
    attn_test::spit(dir.path + "/broken.html", page);
    got = browse(dir.path + "/broken.html", {{"input", 1}, {"layer", 1}, {"head", 2}, {"row", 3}, {"col", 2}}, dir.path + "/profile");
    CHECK(got.at("dims") == json{2, 1, 4, 5, 5});
    CHECK(got.at("hover").get<std::string>().rfind(want, 0) != 0);
}

TEST_CASE("view in chromium: a whole model's page (24 layers x 14 heads, T=512) loads and every head and layer switch completes") {
    require_chromium();
    attn_test::scratch_dir dir;
    // A whole model's weights as HF output_attentions stacks them, (L, B, H, T, T) (Qwen2.5-0.5B:
    // 24 layers of 14 query heads); 88 Mi cells, so the page stores 8-bit codes (io::view_bits).
    const std::size_t L = 24, H = 14, T = 512;
    write_causal_weights(dir.path + "/model.npy", L, H, T);
    const auto t0 = std::chrono::steady_clock::now();
    auto r = attn_test::run_attn("view '" + dir.path + "/model.npy' -o '" + dir.path + "/model.html'");
    const double write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    REQUIRE_MESSAGE(r.code == 0, r.err);
    std::filesystem::remove(dir.path + "/model.npy");
    const double page_bytes = static_cast<double>(std::filesystem::file_size(dir.path + "/model.html"));

    double seconds = 0;
    const json got = browse_timed(dir.path + "/model.html", {{"timing", {{"rounds", 1}}}}, dir.path + "/profile", &seconds);
    REQUIRE_MESSAGE(got.at("errors") == json::array(), got.dump());
    MESSAGE("whole-model page " << L << "x" << H << " heads, T=" << T << ": " << page_bytes / 1e6 << " MB, written in "
                                << write_s << " s; chromium ran " << seconds << " s");
    MESSAGE("load (ms since navigation): " << got.at("load_ms").dump() << "; the switches took " << got.at("tour_ms") << " ms");
    for (const char* k : {"head", "mean", "layer", "rollout"})
        MESSAGE(std::string(k) << " switch ms: drawn (median, max) " << got.at(k).at("sync").dump()
                               << ", on screen at the next frame " << got.at(k).at("frame").dump());
    MESSAGE("ms in each step of render(): " << got.at("spent_ms").dump());
    {
        CAPTURE(got.dump());
        CHECK(got.at("dims") == json{L, 1, H, T, T});
        CHECK(got.at("bits") == 8);
        // Every head (then the mean of heads), every layer, then the rollout.
        CHECK(got.at("head").at("n") == H);
        CHECK(got.at("mean").at("n") == 1);
        CHECK(got.at("layer").at("n") == L);
        CHECK(got.at("rollout").at("n") == 1);
        // Two heads' every cell drawn in the colour the page's cell-by-cell path gives.
        CHECK(got.at("checked_cells") == 2 * T * T);
        CHECK(got.at("mismatched_cells") == 0);
        // Generous bounds only (speed is measured by scripts/bench_view.py, not asserted here):
        // a switch within 2 s, the page loaded and drawn within 30 s, even on a loaded 2-core machine.
        for (const char* k : {"head", "mean", "layer", "rollout"}) {
            CHECK(got.at(k).at("sync").at("max").get<double>() < 2000);
            CHECK(got.at(k).at("frame").at("max").get<double>() < 2000);
        }
        CHECK(got.at("load_ms").at("drawn").get<double>() < 30000);
        // The times are real: all of them fit in chromium's wall time (under virtual time the
        // waits for frames would count seconds that never passed).
        CHECK(got.at("load_ms").at("drawn").get<double>() + got.at("tour_ms").get<double>() < seconds * 1000);
        // The page: 8-bit codes deflated and base64-encoded are at most 4/3 of a byte per cell
        // (the weights' and the rollout's), plus the page's script and tables.
        CHECK(page_bytes < (L * H + 1) * T * T * 4.0 / 3 + 2e6);
        CHECK(seconds < 60);
    }
}

TEST_CASE("view in chromium: long labels cut with an ellipsis and shown whole on hover, in the heatmap and the line view") {
    require_chromium();
    attn_test::scratch_dir dir;
    write_weights(dir.path + "/w.npy", {3, 3}, {1, 0, 0, 0.5, 0.5, 0, 0.2, 0.3, 0.5});
    const std::string longest = std::string(60, 'x');
    auto r = attn_test::run_attn("view '" + dir.path + "/w.npy' --tokens '<|begin_of_text|> b " + longest + "' -o '" + dir.path + "/w.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    json got = browse(dir.path + "/w.html", {{"mode", "lines"}, {"row", 0}, {"col", 0}, {"line_at", {500, 20 + 2.5 * 16}}}, dir.path + "/profile");
    CAPTURE(got.dump());
    CHECK(got.at("errors") == json::array());
    // Special tokens of 17 characters whole (the line view cut every label to 16).
    CHECK(got.at("line_labels")[0][0] == "<|begin_of_text|>");
    CHECK(got.at("line_labels")[1][0] == "<|begin_of_text|>");
    const std::string cut = got.at("line_labels")[1][2];
    CHECK(cut.size() < longest.size());
    CHECK(cut.rfind("xxxx", 0) == 0);
    CHECK(cut.substr(cut.size() - 3) == "…");
    CHECK(got.at("line_hover") == "key 2 \"" + longest + "\"");
    // The heatmap's labels of 160 px at most, cut alike; hovering one shows it whole.
    const json v = got.at("view");
    const double x = v.at("left").get<double>() - 10, y = v.at("top").get<double>() + 2.5 * v.at("ch").get<double>();
    got = browse(dir.path + "/w.html", {{"row", 0}, {"col", 0}, {"label_at", {x, y}}}, dir.path + "/profile");
    CHECK(got.at("errors") == json::array());
    CHECK(got.at("label_hover") == "query 2 \"" + longest + "\"");
    const double kx = v.at("left").get<double>() + 0.5 * v.at("cw").get<double>(), ky = v.at("top").get<double>() - 10;
    got = browse(dir.path + "/w.html", {{"row", 0}, {"col", 0}, {"label_at", {kx, ky}}}, dir.path + "/profile");
    CHECK(got.at("label_hover") == "key 0 \"<|begin_of_text|>\"");
}

TEST_CASE("view in chromium: word_weights' causally masked cells grey, and its colour-bar title clear of the last key label") {
    require_chromium();
    attn_test::scratch_dir dir;
    auto r = attn_test::run_attn("view data/llama-tiny --layer 0 --text 'The capital of France is' --words -o '" + dir.path + "/w.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    json got = browse(dir.path + "/w.html", {{"row", 0}, {"col", 0}}, dir.path + "/profile");
    const json stages = got.at("stages");
    std::size_t words = 0;
    while (words < stages.size() && stages[words] != "word_weights") ++words;
    REQUIRE(words < stages.size());
    // Word 0 (<|begin_of_text|>) sees no later word: (0, 5) is masked, (5, 0) is not.
    got = browse(dir.path + "/w.html", {{"stage", words}, {"head", 0}, {"row", 0}, {"col", 5}}, dir.path + "/profile");
    CAPTURE(got.dump());
    CHECK(got.at("errors") == json::array());
    CHECK(got.at("after") == rgb(attn::io::masked_color));
    CHECK(got.at("hover") == "query 0 \"<|begin_of_text|>\" → key 5 \" is\": word_weights masked");
    // The title starts right of the last key label's right edge (rotated labels are 12 px wide).
    const json title = got.at("bar_title");
    CHECK(title[0].get<double>() > got.at("view").at("last_key").get<double>());
    CHECK(title[2].get<double>() <= got.at("canvas")[0].get<double>());
    // The weights' own page is as it was: their title clear too.
    got = browse(dir.path + "/w.html", {{"row", 0}, {"col", 0}}, dir.path + "/profile");
    CHECK(got.at("bar_title")[0].get<double>() > got.at("view").at("last_key").get<double>());
}

TEST_CASE("view in chromium: the log-colour toggle colours by log10 of the values, off by default") {
    require_chromium();
    attn_test::scratch_dir dir;
    // Row 2's keys: 0.01, 0.09, 0.9; cell (2, 0) is dark on the linear scale, mid-scale on the log one.
    write_weights(dir.path + "/w.npy", {3, 3}, {1, 0, 0, 0.5, 0.5, 0, 0.01, 0.09, 0.9});
    auto r = attn_test::run_attn("view '" + dir.path + "/w.npy' -o '" + dir.path + "/w.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(attn_test::slurp(dir.path + "/w.html").find("<input type=\"checkbox\" id=\"log\">") != std::string::npos);
    json got = browse(dir.path + "/w.html", {{"log", true}, {"row", 2}, {"col", 0}}, dir.path + "/profile");
    CAPTURE(got.dump());
    CHECK(got.at("errors") == json::array());
    // Quantised to 16 bits over [0, 1]: the value shown is code/65534; the log scale spans
    // log10 of one code step (the least positive value) to log10 1 = 0.
    const double shown = std::lround(0.01 * 65534) / 65534.0, floor = std::log10(1 / 65534.0);
    CHECK(got.at("before") == lut(shown));
    CHECK(got.at("after") == lut((std::log10(shown) - floor) / (0 - floor)));
    CHECK(got.at("bar_ticks") == json{"1e-4", "0.001", "0.01", "0.1", "1"});
    CHECK(got.at("hover") == "query 2 \"2\" → key 0 \"0\": weights 0.0100");
    // A masked cell stays grey; and off again, the linear colours.
    got = browse(dir.path + "/w.html", {{"log", true}, {"row", 0}, {"col", 2}}, dir.path + "/profile");
    CHECK(got.at("after") == rgb(attn::io::masked_color));
    got = browse(dir.path + "/w.html", {{"log", false}, {"row", 2}, {"col", 0}}, dir.path + "/profile");
    CHECK(got.at("after") == lut(shown));
    CHECK(got.at("bar_ticks") == json{"0", "0.2", "0.4", "0.6", "0.8", "1"});
}
