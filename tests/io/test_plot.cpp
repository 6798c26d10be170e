// attn/io/plot.hpp and `attn plot` / `attn compute --plot`: valid PNG/SVG/PDF files, the
// layout the header promises (image size, cell positions), exact cell colours read back
// from the PNG, masked cells, and every error path with its exit code and message.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

// attn_core links cairo privately; its headers live in /usr/include/cairo.
#include <cairo/cairo.h>

#include "scratch_dir.hpp"
#include "attn/pipeline.hpp"
#include "attn/error.hpp"
#include "attn/io/input.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "attn/io/plot.hpp"
#include "../src/cli/plot_options.hpp"
#include "cli_util.hpp"

namespace fs = std::filesystem;
using attn_test::run_attn;
using attn_test::slurp;
using namespace attn;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

/// A fresh directory under the working directory (the build tree under ctest), removed
/// with everything in it at the end of the test.
struct scratch_dir {
    fs::path path;
    scratch_dir() {
        static int counter = 0;
        path = fs::absolute("attn-plot-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~scratch_dir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string operator/(const std::string& name) const { return (path / name).string(); }
};

/// Width and height from the IHDR chunk, after checking the PNG signature.
std::pair<std::uint32_t, std::uint32_t> png_size(const std::string& bytes) {
    REQUIRE(bytes.size() > 24);
    REQUIRE(bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
    REQUIRE(bytes.compare(12, 4, "IHDR") == 0);
    auto be32 = [&](std::size_t at) {
        std::uint32_t v = 0;
        for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
        return v;
    };
    return {be32(16), be32(20)};
}

/// A PNG read back through cairo, with pixel access.
struct png_image {
    cairo_surface_t* surface = nullptr;
    explicit png_image(const std::string& path) : surface(cairo_image_surface_create_from_png(path.c_str())) {
        REQUIRE(cairo_surface_status(surface) == CAIRO_STATUS_SUCCESS);
    }
    ~png_image() { cairo_surface_destroy(surface); }
    png_image(const png_image&) = delete;
    png_image& operator=(const png_image&) = delete;

    io::rgb8 at(std::pair<int, int> xy) const {
        const auto [x, y] = xy;
        REQUIRE(x >= 0);
        REQUIRE(y >= 0);
        REQUIRE(x < cairo_image_surface_get_width(surface));
        REQUIRE(y < cairo_image_surface_get_height(surface));
        const unsigned char* row = cairo_image_surface_get_data(surface) + y * cairo_image_surface_get_stride(surface);
        const std::uint32_t p = reinterpret_cast<const std::uint32_t*>(row)[x];  // opaque: no premultiplication
        return {static_cast<std::uint8_t>(p >> 16), static_cast<std::uint8_t>(p >> 8), static_cast<std::uint8_t>(p)};
    }
};

std::string text(io::rgb8 c) {
    return "(" + std::to_string(c.r) + ", " + std::to_string(c.g) + ", " + std::to_string(c.b) + ")";
}

io::heatmap_spec matrix_spec(std::size_t rows, std::size_t cols, const std::vector<double>& values) {
    io::heatmap_spec s;
    s.values = array::from<double>({rows, cols}, values.data());
    return s;
}

/// The weights plot `attn plot data/notebook.npz <settings>` draws, built through the
/// library, for the expected layout and masks.
io::heatmap_spec notebook_spec(bool causal, std::size_t heads, bool grid) {
    io::bundle b = io::load_bundle(std::string(ATTN_SOURCE_DIR) + "/data/notebook.npz");
    attn::pipeline_options o;
    o.attention.mask.causal = causal;
    o.heads = heads;
    o.dump = {"weights", "scores"};
    const io::document doc = attn::compute(std::move(b.arrays), b.tokens, o);
    io::heatmap_view view;
    view.grid = grid;
    return io::heatmap_from_document(doc, view);
}

}  // namespace

TEST_CASE("colormap runs from viridis' dark purple to its yellow and clamps") {
    CHECK(io::colormap(0) == io::rgb8{68, 1, 84});
    CHECK(io::colormap(1) == io::rgb8{253, 231, 37});
    CHECK(io::colormap(0.5) == io::rgb8{33, 145, 140});  // matplotlib viridis(0.5) = #21918c
    CHECK(io::colormap(-3) == io::colormap(0));
    CHECK(io::colormap(7) == io::colormap(1));
    CHECK(io::colormap(std::nan("")) == io::colormap(0));
    // Perceptual ordering: lightness (here simply r+g+b) never decreases along the map.
    int last = -1;
    for (int i = 0; i <= 256; ++i) {
        const io::rgb8 c = io::colormap(i / 256.0);
        const int sum = c.r + c.g + c.b;
        CAPTURE(i);
        CHECK(sum >= last - 2);  // tolerance: 8-bit rounding of the samples
        last = sum;
    }
    for (int i = 0; i <= 16; ++i) CHECK(io::colormap(i / 16.0) != io::masked_color);
}

TEST_CASE("image_format_from_path: the extension decides, anything else is a usage error") {
    CHECK(io::image_format_from_path("a.png") == io::image_format::png);
    CHECK(io::image_format_from_path("dir.d/A.PNG") == io::image_format::png);
    CHECK(io::image_format_from_path("a.svg") == io::image_format::svg);
    CHECK(io::image_format_from_path("a.pdf") == io::image_format::pdf);
    CHECK_THROWS_WITH_AS(io::image_format_from_path("out.gif"),
                         "-o: unknown image format (expected .png, .svg or .pdf, got .gif)", usage_error);
    CHECK_THROWS_WITH_AS(io::image_format_from_path("dir.png/out"),
                         "-o: unknown image format (expected .png, .svg or .pdf, got no extension)", usage_error);
}

TEST_CASE("write_heatmap PNG: size from the layout, exact colours at cell centres") {
    scratch_dir dir;
    // 3×3: a weight of exactly 1, unmasked zeros, a flagged masked zero, a −∞ cell, a NaN.
    io::heatmap_spec s = matrix_spec(3, 3, {1, 0, 0.5, 0.25, 0, -inf, 0, std::nan(""), 0.75});
    s.masked = {0, 0, 0, 0, 1, 0, 0, 0, 0};
    s.vmin = 0.0;
    s.vmax = 1.0;
    s.row_labels = {"my", "name", "is"};
    s.col_labels = {"my", "name", "is"};
    s.title = "weights · test";
    s.colorbar_label = "weights";
    const std::string path = dir / "w.png";
    io::write_heatmap(path, s);

    const io::heatmap_layout l = io::layout_heatmap(s);
    CHECK(l.cell == io::plot_units::max_cell);  // 3 cells never fill single_target
    REQUIRE(l.panels.size() == 1);
    const auto [w, h] = png_size(slurp(path));
    CHECK(w == static_cast<std::uint32_t>(l.width));
    CHECK(h == static_cast<std::uint32_t>(l.height));

    png_image img(path);
    const struct {
        std::size_t r, c;
        io::rgb8 want;
        const char* what;
    } cells[] = {
        {0, 0, io::colormap(1), "weight 1: the max colour"},
        {0, 1, io::colormap(0), "unmasked 0: the min colour"},
        {0, 2, io::colormap(0.5), "0.5: the middle"},
        {1, 0, io::colormap(0.25), "0.25"},
        {1, 1, io::masked_color, "flagged masked 0"},
        {1, 2, io::masked_color, "−∞ is masked"},
        {2, 1, io::masked_color, "NaN is masked"},
        {2, 2, io::colormap(0.75), "0.75"},
    };
    for (const auto& c : cells) {
        CAPTURE(c.what);
        const io::rgb8 got = img.at(io::cell_center(l, 0, c.r, c.c));
        CAPTURE(text(got));
        CAPTURE(text(c.want));
        CHECK(got == c.want);
    }
    // Hatch lines cross masked cells (the colour appears inside the cell)…
    bool hatch_seen = false;
    for (int d = 0; d < l.cell; ++d)
        hatch_seen |= img.at({l.panels[0].x + l.cell + d, l.panels[0].y + l.cell + d / 2}) != io::masked_color;
    CHECK(hatch_seen);
    // …and the colour bar runs from the max colour at the top to the min at the bottom.
    const int bar_mid = l.colorbar_x + io::plot_units::colorbar_width / 2;
    // (a gradient: within a few levels of the ends, 2 px in from the border)
    auto near = [](io::rgb8 a, io::rgb8 b) { return std::abs(a.r - b.r) + std::abs(a.g - b.g) + std::abs(a.b - b.b) <= 12; };
    CHECK(near(img.at({bar_mid, l.colorbar_y + 2}), io::colormap(1)));
    CHECK(near(img.at({bar_mid, l.colorbar_y + l.colorbar_height - 3}), io::colormap(0)));
    CHECK(img.at({1, 1}) == io::background_color);
}

TEST_CASE("write_heatmap: the colour range comes from the unmasked finite data unless given") {
    scratch_dir dir;
    io::heatmap_spec s = matrix_spec(2, 2, {-2, 6, 1e9, 2});
    s.masked = {0, 0, 1, 0};  // a finite --mask-fill value: masked, outside the range
    const std::string path = dir / "s.png";
    io::write_heatmap(path, s);
    const io::heatmap_layout l = io::layout_heatmap(s);
    png_image img(path);
    CHECK(img.at(io::cell_center(l, 0, 0, 0)) == io::colormap(0));
    CHECK(img.at(io::cell_center(l, 0, 0, 1)) == io::colormap(1));
    CHECK(img.at(io::cell_center(l, 0, 1, 0)) == io::masked_color);
    CHECK(img.at(io::cell_center(l, 0, 1, 1)) == io::colormap(0.5));

    s.vmin = 2.0;  // clamps below
    io::write_heatmap(path, s);
    png_image img2(path);
    CHECK(img2.at(io::cell_center(l, 0, 0, 0)) == io::colormap(0));
    CHECK(img2.at(io::cell_center(l, 0, 1, 1)) == io::colormap(0));
}

TEST_CASE("write_heatmap: a grid has one panel per head at the layout's positions") {
    scratch_dir dir;
    // (B, H, Tq, Tk) = (2, 3, 2, 2): head h of batch 1 has the value h/2 everywhere.
    std::vector<double> v(2 * 3 * 2 * 2, 1.0);
    for (std::size_t h = 0; h < 3; ++h)
        for (std::size_t i = 0; i < 4; ++i) v[(1 * 3 + h) * 4 + i] = h / 2.0;
    io::heatmap_spec s;
    s.values = array::from<double>({2, 3, 2, 2}, v.data());
    s.batch = 1;
    s.grid = true;
    s.vmin = 0.0;
    s.vmax = 1.0;
    const std::string path = dir / "g.png";
    io::write_heatmap(path, s);
    const io::heatmap_layout l = io::layout_heatmap(s);
    REQUIRE(l.panels.size() == 3);
    CHECK(l.cell == io::plot_units::max_cell);
    CHECK(l.panels[1].x > l.panels[0].x);  // ⌈√3⌉ = 2 per row
    CHECK(l.panels[2].y > l.panels[0].y);
    const auto [w, h] = png_size(slurp(path));
    CHECK(w == static_cast<std::uint32_t>(l.width));
    CHECK(h == static_cast<std::uint32_t>(l.height));
    png_image img(path);
    for (std::size_t p = 0; p < 3; ++p) {
        CAPTURE(p);
        CHECK(l.panels[p].head == p);
        CHECK(img.at(io::cell_center(l, p, 1, 1)) == io::colormap(p / 2.0));
    }
}

TEST_CASE("write_heatmap: large matrices are drawn as an image, one pixel per cell scaled up") {
    scratch_dir dir;
    const std::size_t n = 200;  // 40 000 cells: above the vector limit
    std::vector<double> v(n * n);
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j) v[i * n + j] = j > i ? -inf : (i + j) % 2 ? 1.0 : 0.0;
    io::heatmap_spec s = matrix_spec(n, n, v);
    s.vmin = 0.0;
    s.vmax = 1.0;
    for (const char* name : {"big.png", "big.svg", "big.pdf"}) {
        CAPTURE(name);
        CHECK_NOTHROW(io::write_heatmap(dir / name, s));
    }
    const io::heatmap_layout l = io::layout_heatmap(s);
    CHECK(l.cell == io::plot_units::single_target / static_cast<int>(n));
    png_image img(dir / "big.png");
    CHECK(img.at(io::cell_center(l, 0, 0, 0)) == io::colormap(0));
    CHECK(img.at(io::cell_center(l, 0, 1, 0)) == io::colormap(1));
    CHECK(img.at(io::cell_center(l, 0, 0, 1)) == io::masked_color);
    CHECK(img.at(io::cell_center(l, 0, n - 1, n - 2)) == io::colormap(1));
}

TEST_CASE("write_heatmap SVG and PDF: valid files") {
    scratch_dir dir;
    io::heatmap_spec s = matrix_spec(2, 3, {0.1, 0.2, 0.7, 0.3, 0.3, 0.4});
    s.title = "svg and pdf";
    io::write_heatmap(dir / "w.svg", s);
    io::write_heatmap(dir / "w.pdf", s);
    const std::string svg = slurp(dir / "w.svg"), pdf = slurp(dir / "w.pdf");
    CHECK(svg.rfind("<?xml", 0) == 0);
    CHECK(svg.find("<svg") != std::string::npos);
    const io::heatmap_layout l = io::layout_heatmap(s);
    CHECK(svg.find("viewBox=\"0 0 " + std::to_string(l.width) + " " + std::to_string(l.height) + "\"") != std::string::npos);
    CHECK(pdf.rfind("%PDF-", 0) == 0);
    CHECK(pdf.find("%%EOF") != std::string::npos);
}

TEST_CASE("write_heatmap errors: typed, one line, and no file left behind") {
    scratch_dir dir;
    io::heatmap_spec s = matrix_spec(2, 2, {0, 1, 1, 0});
    CHECK_THROWS_WITH_AS(io::write_heatmap(dir / "w.gif", s),
                         "-o: unknown image format (expected .png, .svg or .pdf, got .gif)", usage_error);
    s.head = 1;
    CHECK_THROWS_WITH_AS(io::write_heatmap(dir / "w.png", s), "--head: out of range (expected 0, got 1)", usage_error);
    s.head = 0;
    s.batch = 2;
    CHECK_THROWS_WITH_AS(io::layout_heatmap(s), "--batch: out of range (expected 0, got 2)", usage_error);
    s.batch = 0;
    s.masked = {1};
    CHECK_THROWS_AS(io::write_heatmap(dir / "w.png", s), shape_error);
    s.masked.clear();
    s.row_labels = {"only one"};
    CHECK_THROWS_AS(io::write_heatmap(dir / "w.png", s), shape_error);
    s.row_labels.clear();
    s.values.shape = {4};
    CHECK_THROWS_WITH_AS(io::write_heatmap(dir / "w.png", s),
                         "plot: values are not a matrix (expected (Tq, Tk) or (B, H, Tq, Tk), got (4,))", shape_error);
    s.values.shape = {2, 2};
    CHECK_THROWS_AS(io::write_heatmap(dir / "no-such-dir/w.png", s), io_error);
    CHECK(fs::is_empty(dir.path));
}

TEST_CASE("heatmap_from_document: a batch of ids that differ is labelled per item from meta.model.tokens") {
    // What a checkpoint run writes for token ids (2, 3) whose items differ: no top-level
    // tokens, each item's labels in meta.model.tokens (docs/design.md §4.3).
    io::document doc;
    doc.meta = nlohmann::ordered_json::object();
    doc.meta["model"]["tokens"] = {{"The", " cat", " sat"}, {"A", " dog", " ran"}};
    const std::vector<double> w(2 * 3 * 3, 1.0 / 3);
    doc.tensors.push_back({"weights", array::from<double>({2, 3, 3}, w.data())});
    io::heatmap_view view;
    view.batch = 1;
    const io::heatmap_spec s = io::heatmap_from_document(doc, view);
    CHECK(s.row_labels == std::vector<std::string>{"A", " dog", " ran"});
    CHECK(s.col_labels == std::vector<std::string>{"A", " dog", " ran"});
    view.batch = 0;
    CHECK(io::heatmap_from_document(doc, view).row_labels == std::vector<std::string>{"The", " cat", " sat"});
}

TEST_CASE("heatmap_from_document: head axis from meta, masks from scores, labels from tokens") {
    const io::heatmap_spec s = notebook_spec(true, 1, false);
    CHECK(s.values.shape == shape_t{1, 1, 4, 4});
    CHECK(s.title == "weights · mask: causal · scale: 0.3536 · batch 0, head 0");
    CHECK(s.colorbar_label == "weights");
    REQUIRE(s.vmin);
    REQUIRE(s.vmax);
    CHECK(*s.vmin == 0);
    CHECK(*s.vmax == 1);
    // Causal: cell (i, j) masked iff j > i.
    REQUIRE(s.masked.size() == 16);
    for (std::size_t i = 0; i < 4; ++i)
        for (std::size_t j = 0; j < 4; ++j) {
            CAPTURE(i);
            CAPTURE(j);
            CHECK(static_cast<bool>(s.masked[i * 4 + j]) == (j > i));
        }

    // A rank-2 input split into 2 heads gives (H, Tq, Tk): the leading axis is heads.
    const io::heatmap_spec g = notebook_spec(false, 2, true);
    CHECK(g.values.shape == shape_t{1, 2, 4, 4});
    CHECK(g.title == "weights · mask: none · scale: 0.5 · batch 0, heads 0–1");
    CHECK(std::none_of(g.masked.begin(), g.masked.end(), [](std::uint8_t m) { return m != 0; }));

    io::document doc;
    doc.tokens = {"my", "name", "is", "Aj"};
    const std::vector<double> w{1, 0, 0.5, 0.5};
    const std::vector<double> sc{0, -inf, 1, 1};
    doc.tensors.push_back({"weights", array::from<double>({2, 2}, w.data())});
    CHECK_THROWS_WITH_AS(io::heatmap_from_document(doc, {}), "--tokens: one token per query (expected 2, got 4)",
                         value_error);
    doc.tokens = {"a", "b"};
    io::heatmap_spec t = io::heatmap_from_document(doc, {});
    CHECK(t.row_labels == std::vector<std::string>{"a", "b"});
    CHECK(t.col_labels == std::vector<std::string>{"a", "b"});
    CHECK(t.title == "weights · batch 0, head 0");  // no meta (an .npz): no settings
    CHECK(t.masked == std::vector<std::uint8_t>{0, 1, 0, 0});  // no scores: exact zeros
    doc.tensors.push_back({"scores", array::from<double>({2, 2}, sc.data())});
    t = io::heatmap_from_document(doc, {});
    CHECK(t.masked == std::vector<std::uint8_t>{0, 1, 0, 0});
    io::heatmap_view v;
    v.stage = "qk";
    CHECK_THROWS_WITH_AS(io::heatmap_from_document(doc, v), "--stage: not in the input (expected scores or weights, got qk)",
                         value_error);
    v.stage = "scores";
    v.head = 1;
    CHECK_THROWS_WITH_AS(io::heatmap_from_document(doc, v), "--head: out of range (expected 0, got 1)", usage_error);
}

// ---- the command line ------------------------------------------------------------------

TEST_CASE("attn plot data/notebook.npz --mask causal -o out.png") {
    scratch_dir dir;
    const std::string out = dir / "out.png";
    const auto r = run_attn("plot data/notebook.npz --mask causal -o '" + out + "'");
    CHECK(r.code == 0);
    CHECK(r.err.empty());
    CHECK(r.out.empty());
    const io::heatmap_layout l = io::layout_heatmap(notebook_spec(true, 1, false));
    const auto [w, h] = png_size(slurp(out));
    CHECK(w == static_cast<std::uint32_t>(l.width));
    CHECK(h == static_cast<std::uint32_t>(l.height));
    png_image img(out);
    CHECK(img.at(io::cell_center(l, 0, 0, 0)) == io::colormap(1));  // row 0 attends only to key 0
    CHECK(img.at(io::cell_center(l, 0, 0, 1)) == io::masked_color);
    CHECK(img.at(io::cell_center(l, 0, 2, 3)) == io::masked_color);
    CHECK(img.at(io::cell_center(l, 0, 3, 3)) != io::masked_color);
    CHECK(fs::directory_iterator(dir.path)->path().filename() == "out.png");  // no temporary left
}

TEST_CASE("attn plot reads attn's own JSON and .npz output, and stdin") {
    scratch_dir dir;
    REQUIRE(run_attn("compute --mask causal data/notebook.npz -o '" + (dir / "w.json") + "'").code == 0);
    REQUIRE(run_attn("compute --mask causal data/notebook.npz -o '" + (dir / "w.npz") + "'").code == 0);
    const auto direct = run_attn("plot data/notebook.npz --mask causal -o '" + (dir / "direct.png") + "'");
    REQUIRE(direct.code == 0);

    const auto j = run_attn("plot '" + (dir / "w.json") + "' -o '" + (dir / "w.png") + "'");
    CHECK(j.code == 0);
    CHECK(j.err.empty());
    // Same values (shortest round-trip JSON), same meta, same masks: the same image.
    CHECK(slurp(dir / "w.png") == slurp(dir / "direct.png"));

    const auto z = run_attn("plot '" + (dir / "w.npz") + "' -o '" + (dir / "z.png") + "'");
    CHECK(z.code == 0);
    png_size(slurp(dir / "z.png"));

    const auto s = run_attn("plot - --stage scores -o '" + (dir / "s.svg") + "'", slurp(dir / "w.json"));
    CHECK(s.code == 0);
    CHECK(slurp(dir / "s.svg").rfind("<?xml", 0) == 0);

    const auto stdin_input = run_attn("plot - --causal -o '" + (dir / "in.pdf") + "'",
                                      slurp(std::string(ATTN_SOURCE_DIR) + "/data/notebook.json"));
    CHECK(stdin_input.code == 0);
    CHECK(slurp(dir / "in.pdf").rfind("%PDF-", 0) == 0);

    // Settings belong to the computation, which attn output has already had.
    const auto m = run_attn("plot '" + (dir / "w.json") + "' --mask causal -o '" + (dir / "m.png") + "'");
    CHECK(m.code == 2);
    CHECK(m.err.find("attn: error: --mask: does not apply to attn output") == 0);
    const auto q = run_attn("plot '" + (dir / "w.json") + "' --stage qk -o '" + (dir / "m.png") + "'");
    CHECK(q.code == 1);
    CHECK(q.err == "attn: error: --stage: not in the input (expected scores or weights, got qk)\n");
    CHECK_FALSE(fs::exists(dir / "m.png"));
}

TEST_CASE("attn plot --grid draws every head") {
    scratch_dir dir;
    const std::string out = dir / "grid.png";
    const auto r = run_attn("plot data/notebook.npz --heads 2 --grid -o '" + out + "'");
    CHECK(r.code == 0);
    CHECK(r.err.empty());
    const io::heatmap_layout l = io::layout_heatmap(notebook_spec(false, 2, true));
    REQUIRE(l.panels.size() == 2);
    const auto [w, h] = png_size(slurp(out));
    CHECK(w == static_cast<std::uint32_t>(l.width));
    CHECK(h == static_cast<std::uint32_t>(l.height));
    const io::heatmap_layout one = io::layout_heatmap(notebook_spec(false, 2, false));
    CHECK(l.width > one.width);

    const auto h1 = run_attn("plot data/notebook.npz --heads 2 --head 1 -o '" + (dir / "h1.png") + "'");
    CHECK(h1.code == 0);
    const auto both = run_attn("plot data/notebook.npz --heads 2 --grid --head 1 -o '" + (dir / "x.png") + "'");
    CHECK(both.code == 2);
}

TEST_CASE("attn plot errors: exit codes and exact messages") {
    scratch_dir dir;
    const auto ext = run_attn("plot data/notebook.npz -o '" + (dir / "out.gif") + "'");
    CHECK(ext.code == 2);
    CHECK(ext.err == "attn: error: -o: unknown image format (expected .png, .svg or .pdf, got .gif)\n");
    // Out-of-range --head / --batch are options that do not fit: usage errors, exit 2.
    const auto head = run_attn("plot data/notebook.npz --heads 2 --head 2 -o '" + (dir / "out.png") + "'");
    CHECK(head.code == 2);
    CHECK(head.err == "attn: error: --head: out of range (expected 0 to 1, got 2)\n");
    const auto batch = run_attn("plot data/notebook.npz --batch 1 -o '" + (dir / "out.png") + "'");
    CHECK(batch.code == 2);
    CHECK(batch.err == "attn: error: --batch: out of range (expected 0, got 1)\n");
    const auto no_o = run_attn("plot data/notebook.npz");
    CHECK(no_o.code == 2);
    const auto stage = run_attn("plot data/notebook.npz --stage output -o '" + (dir / "out.png") + "'");
    CHECK(stage.code == 2);
    const auto missing = run_attn("plot '" + (dir / "missing.npz") + "' -o '" + (dir / "out.png") + "'");
    CHECK(missing.code == 1);
    CHECK(fs::is_empty(dir.path));
}

TEST_CASE("attn compute --plot FILE writes the data and the weights heatmap of batch 0, head 0") {
    scratch_dir dir;
    const std::string data = dir / "d.json", plot = dir / "p.png";
    const auto r = run_attn("compute --mask causal data/notebook.npz --dump output -o '" + data + "' --plot '" + plot + "'");
    CHECK(r.code == 0);
    CHECK(r.err.empty());
    const std::string json = slurp(data);
    CHECK(json.find("\"output\"") != std::string::npos);
    CHECK(json.find("\"weights\"") == std::string::npos);  // computed for the plot only
    CHECK(json.find("\"scores\"") == std::string::npos);
    const io::heatmap_layout l = io::layout_heatmap(notebook_spec(true, 1, false));
    png_image img(plot);
    CHECK(img.at(io::cell_center(l, 0, 0, 0)) == io::colormap(1));
    CHECK(img.at(io::cell_center(l, 0, 0, 3)) == io::masked_color);
    // The same picture as attn plot's.
    REQUIRE(run_attn("plot data/notebook.npz --mask causal -o '" + (dir / "q.png") + "'").code == 0);
    CHECK(slurp(plot) == slurp(dir / "q.png"));

    const auto bad = run_attn("compute data/notebook.npz --plot '" + (dir / "p.jpg") + "'");
    CHECK(bad.code == 2);
    CHECK(bad.err == "attn: error: --plot: unknown image format (expected .png, .svg or .pdf, got .jpg)\n");
    CHECK(bad.out.empty());  // refused before computing anything
    const auto several = run_attn("compute data/notebook.npz data/x.npy --plot '" + (dir / "s.png") + "'");
    CHECK(several.code == 2);
    CHECK(several.err == "attn: error: --plot: plots a single input (expected one INPUT, got a batch run)\n");
}

TEST_CASE("attn compute --plot keeps every dumped stage with parts (stats.*, head_stats.*), on a held and a checkpoint run") {
    // --plot drops what it computed only for the picture (weights, scores not dumped); a
    // stage with parts is dumped by its name, and its parts used to be dropped with them.
    scratch_dir dir;
    const auto names = [](const std::string& path) {
        std::vector<std::string> out;
        for (const auto& t : io::read_npz(slurp(path), path)) out.push_back(t.name);
        return out;
    };
    const auto with_and_without_plot = [&](const std::string& args) {
        CAPTURE(args);
        REQUIRE(run_attn("compute " + args + " -o '" + (dir / "a.npz") + "'").code == 0);
        const auto r = run_attn("compute " + args + " --plot '" + (dir / "p.png") + "' -o '" + (dir / "b.npz") + "'");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        CHECK(names(dir / "b.npz") == names(dir / "a.npz"));
        return names(dir / "b.npz");
    };
    const auto stats = with_and_without_plot("data/notebook.npz --mask causal --dump output,stats");
    CHECK(std::count_if(stats.begin(), stats.end(), [](const std::string& n) { return n.rfind("stats.", 0) == 0; }) > 5);
    CHECK(std::find(stats.begin(), stats.end(), "weights") == stats.end());  // computed for the plot only
    const auto heads = with_and_without_plot("data/gpt2-tiny/model.safetensors --layer all --ids 1,2,3 --dump weights,head_stats");
    CHECK(std::find(heads.begin(), heads.end(), "head_stats.entropy") != heads.end());
}

TEST_CASE("plot: a non-finite --vmin or --vmax is a usage error") {
    const attn_test::scratch_dir scratch;
    const std::string never = scratch.path + "/never-written.png";
    for (const char* opt : {"--vmax inf", "--vmin -inf", "--vmax nan"}) {
        CAPTURE(opt);
        const auto r = run_attn(std::string("plot data/notebook.npz ") + opt + " -o '" + never + "'");
        CHECK(r.code == 2);
        CHECK(r.err.rfind("attn: error: --vm", 0) == 0);
        CHECK(r.err.find(": not a finite number (expected a finite number, got ") != std::string::npos);
        CHECK_FALSE(fs::exists(never));
    }
}

TEST_CASE("plot: ranges too narrow or too wide to step through finish with a bounded number of ticks") {
    // Each of these used to loop, allocating ticks until memory ran out.
    const std::string dir = fs::absolute(attn_test::temp_dir()).string();
    const std::vector<std::vector<double>> cases = {
        {1e16, 1e16 + 2, 1e16, 1e16 + 4},     // steps below the spacing of doubles there
        {1e300, 1e300, 1e300, 1e300},         // one value: widened around it
        {-1.7e308, 1.7e308, 0, 1},            // hi - lo overflows
        {1, 1 + 0x1p-52, 1, 1},               // one ulp apart
    };
    for (std::size_t i = 0; i < cases.size(); ++i) {
        CAPTURE(i);
        const std::string in = dir + "/s" + std::to_string(i) + ".npz", out = dir + "/s" + std::to_string(i) + ".png";
        {
            std::ofstream f(in, std::ios::binary);
            io::write_npz(f, {{"scores", array::from<double>({2, 2}, cases[i].data())}});
        }
        const auto r = run_attn("plot '" + in + "' --stage scores -o '" + out + "'", "", "timeout 60 ");
        CHECK(r.code == 0);
        CHECK(r.err.empty());
        CHECK(fs::exists(out));
    }
    fs::remove_all(dir);
}

// ---- figure size, label thinning, colour limits, log scale, annotations, lone arrays ----

namespace {

bool boxes_overlap(const io::heatmap_layout::label_box& a, const io::heatmap_layout::label_box& b) {
    return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

/// A 40×40 matrix (a diagonal of 1 in a field of 0.1) labelled tok0 … tok39.
io::heatmap_spec forty_tokens() {
    std::vector<double> v(40 * 40, 0.1);
    for (std::size_t i = 0; i < 40; ++i) v[i * 40 + i] = 1;
    io::heatmap_spec s = matrix_spec(40, 40, v);
    for (int i = 0; i < 40; ++i) s.row_labels.push_back("tok" + std::to_string(i));
    s.col_labels = s.row_labels;
    s.title = "forty";
    return s;
}

std::string forty_token_words() {
    std::string t;
    for (int i = 0; i < 40; ++i) t += (i ? " tok" : "tok") + std::to_string(i);
    return t;
}

void write_npy_file(const std::string& path, const array& a) {
    std::ofstream f(path, std::ios::binary);
    io::write_npy(f, a);
}

/// Every pixel strictly inside cell (row, col) of panel 0, one pixel in from its edges.
std::vector<io::rgb8> cell_interior(const png_image& img, const io::heatmap_layout& l, std::size_t row, std::size_t col) {
    std::vector<io::rgb8> px;
    const int x0 = l.panels[0].x + static_cast<int>(col) * l.cell, y0 = l.panels[0].y + static_cast<int>(row) * l.cell;
    for (int y = y0 + 1; y < y0 + l.cell - 1; ++y)
        for (int x = x0 + 1; x < x0 + l.cell - 1; ++x) px.push_back(img.at({x, y}));
    return px;
}

}  // namespace

TEST_CASE("parse_figure_size, parse_dpi, parse_color_limit: values and exact usage errors") {
    CHECK(cli::parse_figure_size("800x600") == io::figure_size{800, 600});
    CHECK(cli::parse_figure_size("1X16384") == io::figure_size{1, 16384});
    const struct {
        const char* text;
        const char* message;
    } sizes[] = {
        {"0x600", "--size: not positive (expected 1 to 16384 pixels per side, got 0x600)"},
        {"-800x600", "--size: not positive (expected 1 to 16384 pixels per side, got -800x600)"},
        {"800x-1", "--size: not positive (expected 1 to 16384 pixels per side, got 800x-1)"},
        {"16385x600", "--size: too large (expected 1 to 16384 pixels per side, got 16385x600)"},
        {"800x99999999", "--size: too large (expected 1 to 16384 pixels per side, got 800x99999999)"},
        {"800", "--size: not WIDTHxHEIGHT (expected two whole numbers of pixels like 800x600, got 800)"},
        {"800x", "--size: not WIDTHxHEIGHT (expected two whole numbers of pixels like 800x600, got 800x)"},
        {"axb", "--size: not WIDTHxHEIGHT (expected two whole numbers of pixels like 800x600, got axb)"},
        {"8.5x600", "--size: not WIDTHxHEIGHT (expected two whole numbers of pixels like 800x600, got 8.5x600)"},
        {"800x600x2", "--size: not WIDTHxHEIGHT (expected two whole numbers of pixels like 800x600, got 800x600x2)"},
        {"99999999999x1", "--size: not WIDTHxHEIGHT (expected two whole numbers of pixels like 800x600, got 99999999999x1)"},
        {"", "--size: not WIDTHxHEIGHT (expected two whole numbers of pixels like 800x600, got )"},
    };
    for (const auto& c : sizes) {
        CAPTURE(c.text);
        CHECK_THROWS_WITH_AS(cli::parse_figure_size(c.text), c.message, usage_error);
    }

    CHECK(cli::parse_dpi("144") == 144);
    CHECK(cli::parse_dpi("96.5") == 96.5);
    CHECK(cli::parse_dpi("1200") == 1200);
    for (const char* bad : {"0", "-72", "0.5", "1201", "1e9", "abc", "", "72dpi", "nan", "inf"}) {
        CAPTURE(bad);
        const std::string want = "--dpi: not a resolution (expected a number of dots per inch from 1 to 1200, got " + std::string(bad) + ")";
        CHECK_THROWS_WITH_AS(cli::parse_dpi(bad), want.c_str(), usage_error);
    }

    CHECK_FALSE(cli::parse_color_limit("--vmax", "auto").has_value());
    CHECK(cli::parse_color_limit("--vmax", "0.5") == 0.5);
    CHECK(cli::parse_color_limit("--vmin", "-2e3") == -2000);
    CHECK_THROWS_WITH_AS(cli::parse_color_limit("--vmax", "abc"), "--vmax: not a number (expected a finite number or auto, got abc)",
                         usage_error);
    CHECK_THROWS_WITH_AS(cli::parse_color_limit("--vmin", "AUTO"), "--vmin: not a number (expected a finite number or auto, got AUTO)",
                         usage_error);
    CHECK_THROWS_WITH_AS(cli::parse_color_limit("--vmin", "-inf"), "--vmin: not a finite number (expected a finite number, got -inf)",
                         usage_error);
}

TEST_CASE("labels_drawn: every k-th label, k from the label's extent and the cell spacing, never overlapping") {
    // Room for every label: all drawn.
    std::vector<std::size_t> all(40);
    for (std::size_t i = 0; i < 40; ++i) all[i] = i;
    CHECK(io::labels_drawn(40, 20, 17) == all);
    CHECK(io::labels_drawn(40, 17, 17) == all);
    // 5-unit cells, 17-unit labels: k = ⌈17/5⌉ = 4.
    const std::vector<std::size_t> some = io::labels_drawn(40, 5, 17);
    CHECK(some == std::vector<std::size_t>{0, 4, 8, 12, 16, 20, 24, 28, 32, 36});
    // Independently: for many spacings, fewer than 40 once a label is wider than a cell,
    // and two labels centred on their cells never overlap (centre distance ≥ extent),
    // and no drawable label is left out (the step is the smallest that works).
    for (double spacing : {0.5, 1.0, 2.0, 3.0, 4.25, 5.0, 7.0, 11.0, 16.0, 17.0, 40.0}) {
        CAPTURE(spacing);
        const double extent = 17;
        const std::vector<std::size_t> d = io::labels_drawn(40, spacing, extent);
        REQUIRE_FALSE(d.empty());
        CHECK(d.front() == 0);
        if (spacing < extent) CHECK(d.size() < 40);
        for (std::size_t i = 1; i < d.size(); ++i) {
            CHECK((d[i] - d[i - 1]) * spacing >= extent);
            if (d[i] - d[i - 1] > 1) CHECK((d[i] - d[i - 1] - 1) * spacing < extent);
        }
        CHECK(d.back() + (d.size() > 1 ? d[1] : 40) >= 40);  // nothing left out at the end
    }
    CHECK(io::labels_drawn(0, 5, 17).empty());
    CHECK(io::labels_drawn(3, 1, 100) == std::vector<std::size_t>{0});
    CHECK_THROWS_AS(io::labels_drawn(4, 0, 17), value_error);
    CHECK_THROWS_AS(io::labels_drawn(4, -1, 17), value_error);
    CHECK_THROWS_AS(io::labels_drawn(4, 5, std::nan("")), value_error);
}

TEST_CASE("--size: 40 tokens in a small figure get fewer labels, none overlapping, inside the image") {
    scratch_dir dir;
    io::heatmap_spec s = forty_tokens();
    for (const io::figure_size size : {io::figure_size{300, 260}, io::figure_size{800, 600}, io::figure_size{500, 900}}) {
        CAPTURE(size.width);
        s.size = size;
        const io::heatmap_layout l = io::layout_heatmap(s);
        CHECK(l.width == size.width);
        CHECK(l.height == size.height);
        CHECK(l.cell >= 1);
        // The whole matrix inside the image.
        CHECK(l.panels[0].x >= 0);
        CHECK(l.panels[0].y >= 0);
        CHECK(l.panels[0].x + 40 * l.cell <= l.width);
        CHECK(l.panels[0].y + 40 * l.cell <= l.height);
        CHECK(l.colorbar_x + l.colorbar_width <= l.width);
        REQUIRE_FALSE(l.row_labels.empty());
        REQUIRE_FALSE(l.col_labels.empty());
        if (size.width == 300) {
            CHECK(l.row_labels.size() < 40);
            CHECK(l.col_labels.size() < 40);
        }
        std::vector<io::heatmap_layout::label_box> boxes = l.row_labels;
        boxes.insert(boxes.end(), l.col_labels.begin(), l.col_labels.end());
        for (std::size_t a = 0; a < boxes.size(); ++a) {
            CHECK(boxes[a].x >= 0);
            CHECK(boxes[a].y >= 0);
            CHECK(boxes[a].x + boxes[a].w <= l.width);
            CHECK(boxes[a].y + boxes[a].h <= l.height);
            for (std::size_t b = a + 1; b < boxes.size(); ++b) {
                CAPTURE(a);
                CAPTURE(b);
                CHECK_FALSE(boxes_overlap(boxes[a], boxes[b]));
            }
        }
        const std::string path = dir / ("s" + std::to_string(size.width) + ".png");
        io::write_heatmap(path, s);
        const auto [w, h] = png_size(slurp(path));
        CHECK(w == static_cast<std::uint32_t>(size.width));
        CHECK(h == static_cast<std::uint32_t>(size.height));
        png_image img(path);
        CHECK(img.at(io::cell_center(l, 0, 5, 5)) == io::colormap(1));
        CHECK(img.at(io::cell_center(l, 0, 5, 6)) == io::colormap(0));
    }
    // Without --size the natural layout also thins 40 labels (448 / 40 = 11-px cells).
    s.size.reset();
    const io::heatmap_layout natural = io::layout_heatmap(s);
    CHECK(natural.cell == io::plot_units::single_target / 40);
    CHECK(natural.row_labels.size() < 40);

    // Too small for 1-px cells: a data error naming what would fit.
    s.size = io::figure_size{30, 30};
    CHECK_THROWS_AS(io::layout_heatmap(s), value_error);
    try {
        io::layout_heatmap(s);
    } catch (const value_error& e) {
        CHECK(std::string(e.what()).rfind("--size: too small for this matrix (expected at least ", 0) == 0);
        CHECK(std::string(e.what()).find(", got 30x30)") != std::string::npos);
    }
}

TEST_CASE("--dpi: the natural layout scales with dpi/72, SVG and PDF pages are pixels·72/dpi points") {
    scratch_dir dir;
    io::heatmap_spec s = matrix_spec(2, 3, {0.1, 0.2, 0.7, 0.3, 0.3, 0.4});
    s.vmin = 0.0;
    s.vmax = 1.0;
    const io::heatmap_layout at72 = io::layout_heatmap(s);
    s.dpi = 144;
    const io::heatmap_layout at144 = io::layout_heatmap(s);
    CHECK(at144.scale == 2);
    CHECK(at144.cell == 2 * at72.cell);
    CHECK(at144.colorbar_width == 2 * io::plot_units::colorbar_width);
    CHECK(at144.width > at72.width * 3 / 2);
    io::write_heatmap(dir / "d.png", s);
    const auto [w, h] = png_size(slurp(dir / "d.png"));
    CHECK(w == static_cast<std::uint32_t>(at144.width));
    CHECK(h == static_cast<std::uint32_t>(at144.height));
    png_image img(dir / "d.png");
    CHECK(img.at(io::cell_center(at144, 0, 0, 2)) == io::colormap(0.7));

    s.size = io::figure_size{800, 600};
    io::write_heatmap(dir / "d.svg", s);
    io::write_heatmap(dir / "d.pdf", s);
    CHECK(slurp(dir / "d.svg").find("viewBox=\"0 0 400 300\"") != std::string::npos);
    CHECK(slurp(dir / "d.pdf").find("/MediaBox [ 0 0 400 300 ]") != std::string::npos);
    s.dpi = 0;
    CHECK_THROWS_AS(io::layout_heatmap(s), usage_error);
}

TEST_CASE("--log: colour of a cell is colormap of its log10 position in the range, zeros drawn masked") {
    scratch_dir dir;
    const std::vector<double> v{1, 0.1, 0.01, 0, 0.05, 0.3};
    io::heatmap_spec s = matrix_spec(2, 3, v);
    s.log = true;
    const std::string path = dir / "log.png";
    io::write_heatmap(path, s);
    const io::heatmap_layout l = io::layout_heatmap(s);
    png_image img(path);
    // Range: the positive values, 0.01 to 1, i.e. log10 from −2 to 0.
    const double lo = std::log10(0.01), hi = std::log10(1.0);
    for (std::size_t i = 0; i < v.size(); ++i) {
        CAPTURE(v[i]);
        const io::rgb8 want = v[i] > 0 ? io::colormap((std::log10(v[i]) - lo) / (hi - lo)) : io::masked_color;
        const io::rgb8 got = img.at(io::cell_center(l, 0, i / 3, i % 3));
        CAPTURE(text(got));
        CAPTURE(text(want));
        CHECK(got == want);
    }
    CHECK(img.at(io::cell_center(l, 0, 0, 1)) == io::colormap(0.5));  // 0.1: half way in decades
    // Given limits are values, not logarithms.
    s.vmin = 0.001;
    s.vmax = 10.0;
    io::write_heatmap(path, s);
    png_image img2(path);
    CHECK(img2.at(io::cell_center(l, 0, 0, 1)) == io::colormap(0.5));  // 0.1 between 1e-3 and 1e1
    CHECK(img2.at(io::cell_center(l, 0, 1, 2)) == io::colormap((std::log10(0.3) + 3) / 4));
    s.vmin = 0.0;
    CHECK_THROWS_WITH_AS(io::layout_heatmap(s), "--vmin: not positive, which --log needs (expected a number > 0, got 0)", usage_error);
}

TEST_CASE("--annotate: numbers inside the cells, or nothing when they do not fit") {
    scratch_dir dir;
    io::heatmap_spec s = matrix_spec(2, 2, {0.25, 1, 0, -inf});
    s.vmin = 0.0;
    s.vmax = 1.0;
    io::write_heatmap(dir / "plain.png", s);
    s.annotate = true;
    const io::heatmap_layout l = io::write_heatmap(dir / "annot.png", s);
    CHECK(l.annotated);
    CHECK(l.annotation_cell <= l.cell);
    png_image plain(dir / "plain.png"), annot(dir / "annot.png");
    for (std::size_t c = 0; c < 2; ++c) {
        CAPTURE(c);
        const io::rgb8 fill = io::colormap(c == 0 ? 0.25 : 1.0);
        const auto p = cell_interior(plain, l, 0, c), a = cell_interior(annot, l, 0, c);
        CHECK(std::all_of(p.begin(), p.end(), [&](io::rgb8 x) { return x == fill; }));
        CHECK(std::any_of(a.begin(), a.end(), [&](io::rgb8 x) { return x != fill; }));
        CHECK(std::count(a.begin(), a.end(), fill) > static_cast<long>(a.size() / 2));  // text, not a fill
    }
    // The masked cell gets no number: the same pixels with and without.
    CHECK(cell_interior(plain, l, 1, 1) == cell_interior(annot, l, 1, 1));

    // Cells too small: no numbers at all, the image of the unannotated spec.
    io::heatmap_spec f = forty_tokens();
    f.size = io::figure_size{300, 260};
    io::write_heatmap(dir / "f-plain.png", f);
    f.annotate = true;
    const io::heatmap_layout fl = io::write_heatmap(dir / "f-annot.png", f);
    CHECK_FALSE(fl.annotated);
    CHECK(fl.annotation_cell > fl.cell);
    CHECK(slurp(dir / "f-plain.png") == slurp(dir / "f-annot.png"));
}

TEST_CASE("heatmap_from_array: a lone array drawn as it is") {
    const std::vector<double> v{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    const array a = array::from<double>({3, 4}, v.data());
    io::heatmap_spec s = io::heatmap_from_array(a, "pe", {}, {});
    CHECK(s.values.shape == shape_t{1, 1, 3, 4});
    CHECK(s.title == "pe · batch 0, head 0");
    CHECK(s.colorbar_label == "pe");
    CHECK_FALSE(s.vmin);
    CHECK_FALSE(s.vmax);
    CHECK(s.masked.empty());
    s = io::heatmap_from_array(a, "pe", {}, {"a", "b", "c"});
    CHECK(s.row_labels == std::vector<std::string>{"a", "b", "c"});
    CHECK(s.col_labels.empty());  // 4 columns: not the tokens
    CHECK_THROWS_WITH_AS(io::heatmap_from_array(a, "pe", {}, {"a"}), "--tokens: one token per row (expected 3, got 1)", value_error);
    const array b = array::from<double>({2, 2, 3}, v.data());
    io::heatmap_view view;
    view.batch = 1;
    s = io::heatmap_from_array(b, "w.npy", view, {});
    CHECK(s.values.shape == shape_t{2, 1, 2, 3});
    CHECK(s.batch == 1);
    view.batch = 2;
    CHECK_THROWS_WITH_AS(io::heatmap_from_array(b, "w.npy", view, {}), "--batch: out of range (expected 0 to 1, got 2)", usage_error);
    const array line = array::from<double>({4}, v.data());
    CHECK_THROWS_WITH_AS(io::heatmap_from_array(line, "w.npy", {}, {}),
                         "w.npy: not a matrix to draw (expected rank 2, 3 or 4, got (4,))", shape_error);
}

// ---- the command line: the new plot options ---------------------------------------------

TEST_CASE("attn plot --size, --dpi: exact usage errors, exit 2, nothing written") {
    scratch_dir dir;
    const std::string out = dir / "o.png";
    const struct {
        const char* args;
        const char* err;
    } cases[] = {
        {"--size 0x600", "attn: error: --size: not positive (expected 1 to 16384 pixels per side, got 0x600)\n"},
        {"--size=-800x600", "attn: error: --size: not positive (expected 1 to 16384 pixels per side, got -800x600)\n"},
        {"--size 20000x600", "attn: error: --size: too large (expected 1 to 16384 pixels per side, got 20000x600)\n"},
        {"--size big", "attn: error: --size: not WIDTHxHEIGHT (expected two whole numbers of pixels like 800x600, got big)\n"},
        {"--dpi 0", "attn: error: --dpi: not a resolution (expected a number of dots per inch from 1 to 1200, got 0)\n"},
        {"--dpi -72", "attn: error: --dpi: not a resolution (expected a number of dots per inch from 1 to 1200, got -72)\n"},
        {"--dpi lots", "attn: error: --dpi: not a resolution (expected a number of dots per inch from 1 to 1200, got lots)\n"},
        {"--dpi 5000", "attn: error: --dpi: not a resolution (expected a number of dots per inch from 1 to 1200, got 5000)\n"},
        {"--vmax abc", "attn: error: --vmax: not a number (expected a finite number or auto, got abc)\n"},
        {"--log --vmin 0", "attn: error: --vmin: not positive, which --log needs (expected a number > 0, got 0)\n"},
        {"--log --vmax -1", "attn: error: --vmax: not positive, which --log needs (expected a number > 0, got -1)\n"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.args);
        const auto r = run_attn(std::string("plot data/notebook.npz ") + c.args + " -o '" + out + "'");
        CHECK(r.code == 2);
        CHECK(r.err == c.err);
        CHECK(r.out.empty());
    }
    const auto small = run_attn("plot data/notebook.npz --size 20x20 -o '" + out + "'");
    CHECK(small.code == 1);
    CHECK(small.err.rfind("attn: error: --size: too small for this matrix (expected at least ", 0) == 0);
    CHECK(fs::is_empty(dir.path));
}

TEST_CASE("attn plot: 40 tokens, a small --size, --dpi and --annotate") {
    scratch_dir dir;
    REQUIRE(run_attn("generate --len 40 --embed 8 -o '" + (dir / "x.npy") + "'").code == 0);
    const std::string toks = forty_token_words();
    const auto r = run_attn("plot --x '" + (dir / "x.npy") + "' --tokens '" + toks + "' --size 300x260 -o '" + (dir / "p.png") + "'");
    CHECK(r.code == 0);
    CHECK(r.err.empty());
    const auto [w, h] = png_size(slurp(dir / "p.png"));
    CHECK(w == 300);
    CHECK(h == 260);

    // The layout of that very plot: thinned labels that do not overlap.
    io::bundle in;
    in.arrays.push_back({"x", io::load_array(dir / "x.npy")});
    attn::pipeline_options o;
    o.dump = {"weights", "scores"};
    io::document doc = attn::compute(std::move(in.arrays), {}, o);
    for (int i = 0; i < 40; ++i) doc.tokens.push_back("tok" + std::to_string(i));
    io::heatmap_spec s = io::heatmap_from_document(doc, {});
    s.size = io::figure_size{300, 260};
    s.annotate = true;
    const io::heatmap_layout l = io::layout_heatmap(s);
    CHECK(l.row_labels.size() < 40);
    CHECK(l.col_labels.size() < 40);
    for (std::size_t a = 0; a + 1 < l.row_labels.size(); ++a) CHECK_FALSE(boxes_overlap(l.row_labels[a], l.row_labels[a + 1]));
    for (std::size_t a = 0; a + 1 < l.col_labels.size(); ++a) CHECK_FALSE(boxes_overlap(l.col_labels[a], l.col_labels[a + 1]));
    png_image img(dir / "p.png");
    const double w00 = s.values.value(0);
    CHECK(img.at(io::cell_center(l, 0, 0, 0)) == io::colormap(w00));  // weights: 0..1

    // Cells of a few pixels: no numbers, one warning line, the same image.
    const auto a = run_attn("plot --x '" + (dir / "x.npy") + "' --tokens '" + toks + "' --size 300x260 --annotate -o '" +
                            (dir / "a.png") + "'");
    CHECK(a.code == 0);
    CHECK(a.err == "attn: warning: --annotate: cells too small for the numbers, drawn without them (expected cells of at least " +
                       std::to_string(l.annotation_cell) + " px, got " + std::to_string(l.cell) + " px)\n");
    CHECK(slurp(dir / "a.png") == slurp(dir / "p.png"));

    // Room enough: numbers drawn, no warning, a different image.
    const auto big = run_attn("plot data/notebook.npz --annotate -o '" + (dir / "n.png") + "'");
    CHECK(big.code == 0);
    CHECK(big.err.empty());
    REQUIRE(run_attn("plot data/notebook.npz -o '" + (dir / "n0.png") + "'").code == 0);
    CHECK(slurp(dir / "n.png") != slurp(dir / "n0.png"));
    const auto d3 = run_attn("plot data/notebook.npz --annotate-decimals 3 --dpi 144 -o '" + (dir / "n3.png") + "'");
    CHECK(d3.code == 0);
    CHECK(d3.err.empty());
    const auto [w3, h3] = png_size(slurp(dir / "n3.png"));
    const auto [w1, h1] = png_size(slurp(dir / "n0.png"));
    CHECK(w3 > w1 * 3 / 2);
    CHECK(h3 > h1 * 3 / 2);
}

TEST_CASE("attn plot --vmin/--vmax auto and --log on weights") {
    scratch_dir dir;
    const io::heatmap_spec s = notebook_spec(false, 1, false);
    const io::heatmap_layout l = io::layout_heatmap(s);
    std::size_t arg_max = 0, arg_min = 0;
    double wmin = 2, wmax = -1;
    for (std::size_t i = 0; i < 16; ++i) {
        const double w = s.values.value(i);
        if (w > wmax) wmax = w, arg_max = i;
        if (w < wmin) wmin = w, arg_min = i;
    }
    REQUIRE(wmax < 1);
    REQUIRE(wmin > 0);
    // Default for weights: 0..1.
    REQUIRE(run_attn("plot data/notebook.npz -o '" + (dir / "d.png") + "'").code == 0);
    png_image d(dir / "d.png");
    CHECK(d.at(io::cell_center(l, 0, arg_max / 4, arg_max % 4)) == io::colormap(wmax));
    // auto: the data's range.
    const auto r = run_attn("plot data/notebook.npz --vmin auto --vmax auto -o '" + (dir / "a.png") + "'");
    CHECK(r.code == 0);
    png_image a(dir / "a.png");
    CHECK(a.at(io::cell_center(l, 0, arg_max / 4, arg_max % 4)) == io::colormap(1));
    CHECK(a.at(io::cell_center(l, 0, arg_min / 4, arg_min % 4)) == io::colormap(0));
    const auto half = run_attn("plot data/notebook.npz --vmax auto -o '" + (dir / "h.png") + "'");
    CHECK(half.code == 0);
    png_image hh(dir / "h.png");
    CHECK(hh.at(io::cell_center(l, 0, arg_max / 4, arg_max % 4)) == io::colormap(1));
    CHECK(hh.at(io::cell_center(l, 0, arg_min / 4, arg_min % 4)) == io::colormap(wmin / wmax));  // from 0

    // --log: from the smallest weight to 1, in decades.
    const auto g = run_attn("plot data/notebook.npz --log -o '" + (dir / "g.png") + "'");
    CHECK(g.code == 0);
    CHECK(g.err.empty());
    io::heatmap_spec ls = s;
    ls.log = true;
    ls.vmin.reset();
    const io::heatmap_layout ll = io::layout_heatmap(ls);
    png_image lg(dir / "g.png");
    for (std::size_t i = 0; i < 16; ++i) {
        CAPTURE(i);
        const double t = (std::log10(s.values.value(i)) - std::log10(wmin)) / (std::log10(1.0) - std::log10(wmin));
        CHECK(lg.at(io::cell_center(ll, 0, i / 4, i % 4)) == io::colormap(t));
    }
}

TEST_CASE("attn plot: a lone array is drawn as it is, attention inputs are computed") {
    scratch_dir dir;
    const std::vector<double> v{-1, 0, 1, 2, 3, 4, 5, 7, 9, 11, 13, 15};
    const array m = array::from<double>({3, 4}, v.data());
    write_npy_file(dir / "m.npy", m);
    const auto r = run_attn("plot '" + (dir / "m.npy") + "' -o '" + (dir / "m.png") + "'");
    CHECK(r.code == 0);
    CHECK(r.err.empty());
    const io::heatmap_layout l = io::layout_heatmap(io::heatmap_from_array(m, "m.npy", {}, {}));
    CHECK(l.rows == 3);
    CHECK(l.cols == 4);
    const auto [w, h] = png_size(slurp(dir / "m.png"));
    CHECK(w == static_cast<std::uint32_t>(l.width));
    CHECK(h == static_cast<std::uint32_t>(l.height));
    png_image img(dir / "m.png");
    for (std::size_t i = 0; i < 12; ++i) {
        CAPTURE(i);
        CHECK(img.at(io::cell_center(l, 0, i / 4, i % 4)) == io::colormap((v[i] + 1) / 16));
    }

    // attn's own weights output, written as an .npy, is drawn as it is: a 4×4 matrix.
    REQUIRE(run_attn("compute data/notebook.npz --dump weights -o '" + (dir / "w.npy") + "'").code == 0);
    const auto wr = run_attn("plot '" + (dir / "w.npy") + "' -o '" + (dir / "w.png") + "'");
    CHECK(wr.code == 0);
    const io::heatmap_layout wl = io::layout_heatmap(notebook_spec(false, 1, false));
    CHECK(png_size(slurp(dir / "w.png")).first > 0);
    CHECK(wl.rows == 4);

    // A bundle of one array not named q, k, v or x (posenc's "pe"): drawn; named x: computed.
    {
        std::ofstream f(dir / "pe.npz", std::ios::binary);
        io::write_npz(f, {{"pe", m}});
        std::ofstream g(dir / "x.npz", std::ios::binary);
        io::write_npz(g, {{"x", m}});
    }
    REQUIRE(run_attn("plot '" + (dir / "pe.npz") + "' -o '" + (dir / "pe.png") + "'").code == 0);
    png_image pe(dir / "pe.png");
    const io::heatmap_layout pl = io::layout_heatmap(io::heatmap_from_array(m, "pe", {}, {}));
    CHECK(pe.at(io::cell_center(pl, 0, 2, 3)) == io::colormap(1));
    REQUIRE(run_attn("plot '" + (dir / "x.npz") + "' -o '" + (dir / "x.png") + "'").code == 0);
    REQUIRE(run_attn("plot --x '" + (dir / "m.npy") + "' -o '" + (dir / "xx.png") + "'").code == 0);
    CHECK(slurp(dir / "x.png") == slurp(dir / "xx.png"));
    CHECK(png_size(slurp(dir / "x.png")) != png_size(slurp(dir / "pe.png")));  // 3×3 weights, not 3×4

    // posenc's JSON (with meta) is a lone array too.
    REQUIRE(run_attn("posenc --len 6 --dim 4 --style concat -o '" + (dir / "pe.json") + "'").code == 0);
    const auto pj = run_attn("plot '" + (dir / "pe.json") + "' -o '" + (dir / "pj.png") + "'");
    CHECK(pj.code == 0);
    CHECK(pj.err.empty());

    // Batch selection for rank 3.
    const array b = array::from<double>({2, 2, 3}, v.data());
    write_npy_file(dir / "b.npy", b);
    REQUIRE(run_attn("plot '" + (dir / "b.npy") + "' --batch 1 -o '" + (dir / "b.png") + "'").code == 0);
    io::heatmap_view view;
    view.batch = 1;
    const io::heatmap_layout bl = io::layout_heatmap(io::heatmap_from_array(b, "b.npy", view, {}));
    png_image bi(dir / "b.png");
    CHECK(bi.at(io::cell_center(bl, 0, 0, 0)) == io::colormap(0));  // batch 1 holds 5..15
    CHECK(bi.at(io::cell_center(bl, 0, 1, 2)) == io::colormap(1));

    // Compute options and --stage make no sense for it.
    const auto c = run_attn("plot '" + (dir / "m.npy") + "' --causal -o '" + (dir / "c.png") + "'");
    CHECK(c.code == 2);
    CHECK(c.err == "attn: error: --causal: does not apply to a lone array, which is drawn as it is (expected a compute input, or "
                   "--x FILE to compute over it, got one array in " + (dir / "m.npy") + ")\n");
    const auto st = run_attn("plot '" + (dir / "m.npy") + "' --stage scores -o '" + (dir / "c.png") + "'");
    CHECK(st.code == 2);
    CHECK(st.err == "attn: error: --stage: does not apply to a lone array, which is drawn as it is (expected attn output or a "
                    "compute input, got one array in " + (dir / "m.npy") + ")\n");
    CHECK_FALSE(fs::exists(dir / "c.png"));
}

namespace {

/// The UTF-16BE hex string cairo writes as a PDF /Title for `title` (ASCII and "·" only).
std::string pdf_title_hex(const std::string& title) {
    std::string hex = "FEFF";
    char buf[8];
    for (std::size_t i = 0; i < title.size(); ++i) {
        unsigned cp = static_cast<unsigned char>(title[i]);
        if (cp == 0xC2) cp = static_cast<unsigned char>(title[++i]);  // U+00B7 "·"
        std::snprintf(buf, sizeof buf, "%04X", cp);
        hex += buf;
    }
    return "/Title <" + hex + ">";
}

void write_weights_npz(const std::string& path, shape_t shape, const std::vector<double>& v) {
    std::ofstream f(path, std::ios::binary);
    io::write_npz(f, {{"weights", array::from<double>(shape, v.data())}});
}

}  // namespace

TEST_CASE("attn plot --layer picks one layer of --layer all output, (L, H, T, T) and (L, B, H, Tq, Tk), and last and -1 are the last") {
    scratch_dir dir;
    // Weights of 2 layers × 2 heads of 2×2, every block different; the reference is the
    // one block plotted alone (rank 2), with the same title.
    std::vector<double> w;
    for (int b = 0; b < 4; ++b)
        for (double x : {1.0, 0.0, 0.1 + 0.2 * b, 0.9 - 0.2 * b}) w.push_back(x);
    write_weights_npz(dir / "lh.npz", {2, 2, 2, 2}, w);
    write_weights_npz(dir / "ref.npz", {2, 2}, std::vector<double>(w.begin() + 12, w.begin() + 16));  // layer 1, head 1
    REQUIRE(run_attn("plot '" + (dir / "ref.npz") + "' --title T -o '" + (dir / "ref.png") + "'").code == 0);
    for (const char* layer : {"1", "-1", "last"}) {
        CAPTURE(layer);
        const auto r = run_attn("plot '" + (dir / "lh.npz") + "' --layer " + layer + " --head 1 --title T -o '" + (dir / "p.png") + "'");
        CHECK_MESSAGE(r.code == 0, r.err);
        CHECK(slurp(dir / "p.png") == slurp(dir / "ref.png"));
    }
    // Layer 0 head 1 differs: the layer was really picked.
    REQUIRE(run_attn("plot '" + (dir / "lh.npz") + "' --layer 0 --head 1 --title T -o '" + (dir / "p0.png") + "'").code == 0);
    CHECK(slurp(dir / "p0.png") != slurp(dir / "ref.png"));

    // (L, B, H, Tq, Tk) = (2, 2, 1, 2, 2): layer 1, batch 0 is block 2.
    write_weights_npz(dir / "lbh.npz", {2, 2, 1, 2, 2}, w);
    write_weights_npz(dir / "ref2.npz", {2, 2}, std::vector<double>(w.begin() + 8, w.begin() + 12));
    REQUIRE(run_attn("plot '" + (dir / "ref2.npz") + "' --title T -o '" + (dir / "ref2.png") + "'").code == 0);
    auto r = run_attn("plot '" + (dir / "lbh.npz") + "' --layer -1 --batch 0 --title T -o '" + (dir / "q.png") + "'");
    CHECK_MESSAGE(r.code == 0, r.err);
    CHECK(slurp(dir / "q.png") == slurp(dir / "ref2.png"));

    // A lone (L, B, H, rows, cols) .npy (HF output_attentions stacked): drawn as it is, one
    // layer. Same file name for both: it labels the colour bar.
    fs::create_directories(dir / "l5");
    fs::create_directories(dir / "one");
    {
        std::ofstream f(dir / "l5/w.npy", std::ios::binary);
        io::write_npy(f, array::from<double>({2, 1, 2, 2, 2}, w.data()));
        std::ofstream g(dir / "one/w.npy", std::ios::binary);
        io::write_npy(g, array::from<double>({2, 2}, w.data() + 12));
    }
    REQUIRE(run_attn("plot '" + (dir / "one/w.npy") + "' --title T -o '" + (dir / "one.png") + "'").code == 0);
    r = run_attn("plot '" + (dir / "l5/w.npy") + "' --layer last --head 1 --title T -o '" + (dir / "l5.png") + "'");
    CHECK_MESSAGE(r.code == 0, r.err);
    CHECK(slurp(dir / "l5.png") == slurp(dir / "one.png"));

    // Out of range, and --layer on output without a layer axis: usage errors, no file.
    r = run_attn("plot '" + (dir / "lh.npz") + "' --layer 2 -o '" + (dir / "bad.png") + "'");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --layer: out of range (expected 0 to 1 or -2 to -1, got 2)\n");
    r = run_attn("plot '" + (dir / "lh.npz") + "' --layer -3 -o '" + (dir / "bad.png") + "'");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --layer: out of range (expected 0 to 1 or -2 to -1, got -3)\n");
    r = run_attn("plot '" + (dir / "ref.npz") + "' --layer 0 -o '" + (dir / "bad.png") + "'");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --layer: picks a layer of attn output computed with --layer all (expected stages with a "
                   "leading layer axis, got no layer axis in " + (dir / "ref.npz") + ")\n");
    CHECK_FALSE(fs::exists(dir / "bad.png"));
}

TEST_CASE("attn plot of a checkpoint's --layer all output equals plot CHECKPOINT --layer N, and titles name the model and layer") {
    scratch_dir dir;
    const std::string ck = "data/gpt2-tiny/model.safetensors --ids 1,2,3";
    REQUIRE(run_attn("compute " + ck + " --layer all --format npz -o '" + (dir / "all.npz") + "'").code == 0);
    REQUIRE(run_attn("compute " + ck + " --layer all -o '" + (dir / "all.json") + "'").code == 0);
    // --layer on a checkpoint still computes that layer.
    auto r = run_attn("plot " + ck + " --layer 1 --head 2 --title T -o '" + (dir / "ck.png") + "'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    // Without --vocab the labels are the ids, which an .npz does not keep.
    for (const std::string saved : {"all.npz' --tokens '1 2 3", "all.json"}) {
        CAPTURE(saved);
        r = run_attn("plot '" + (dir / saved) + "' --layer 1 --head 2 --title T -o '" + (dir / "p.png") + "'");
        CHECK_MESSAGE(r.code == 0, r.err);
        CHECK(slurp(dir / "p.png") == slurp(dir / "ck.png"));
    }
    r = run_attn("plot " + ck + " --layer last --head 2 --title T -o '" + (dir / "last.png") + "'");
    CHECK_MESSAGE(r.code == 0, r.err);
    CHECK(slurp(dir / "last.png") == slurp(dir / "ck.png"));

    // The default title names the model and the layer, from the saved meta (an .npz keeps it too).
    r = run_attn("plot '" + (dir / "all.json") + "' --layer -1 -o '" + (dir / "t.pdf") + "'");
    CHECK_MESSAGE(r.code == 0, r.err);
    CHECK(slurp(dir / "t.pdf").find(pdf_title_hex("weights · gpt2 layer 1 of 2 · mask: causal · scale: 0.3536 · batch 0, head 0")) !=
          std::string::npos);
    r = run_attn("plot " + ck + " --layer 0 -o '" + (dir / "c.pdf") + "'");
    CHECK_MESSAGE(r.code == 0, r.err);
    CHECK(slurp(dir / "c.pdf").find(pdf_title_hex("weights · gpt2 layer 0 of 2 · mask: causal · scale: 0.3536 · batch 0, head 0")) !=
          std::string::npos);
    // compute --plot of a --layer all run draws layer 0, as plot does by default.
    r = run_attn("compute " + ck + " --layer all --plot '" + (dir / "cp.png") + "' -o '" + (dir / "cp.json") + "'");
    CHECK_MESSAGE(r.code == 0, r.err);
    r = run_attn("plot " + ck + " --layer 0 -o '" + (dir / "c0.png") + "'");
    CHECK_MESSAGE(r.code == 0, r.err);
    CHECK(slurp(dir / "cp.png") == slurp(dir / "c0.png"));
    r = run_attn("plot '" + (dir / "all.npz") + "' --layer 1 --head 3 -o '" + (dir / "n.pdf") + "'");
    CHECK_MESSAGE(r.code == 0, r.err);
    CHECK(slurp(dir / "n.pdf").find(pdf_title_hex("weights · gpt2 layer 1 of 2 · mask: causal · scale: 0.3536 · batch 0, head 3")) !=
          std::string::npos);
}

TEST_CASE("valid_utf8: each ill-formed sequence becomes one U+FFFD, as the JSON writer's replace rule") {
    const std::string r = "\xEF\xBF\xBD";
    CHECK(io::valid_utf8("plain é ✓ 😀") == "plain é ✓ 😀");
    CHECK(io::valid_utf8("a\xFF" "b") == "a" + r + "b");
    CHECK(io::valid_utf8(" \xC3") == " " + r);                        // a GPT-2 byte label cut inside "é"
    CHECK(io::valid_utf8("\xE2\x82" "x") == r + "x");                 // a truncated 3-byte sequence
    CHECK(io::valid_utf8("\xF0\x9F\x98") == r);                       // cut off by the end
    CHECK(io::valid_utf8("\xE0\x80" "a") == r + r + "a");             // overlong: E0 then a stray 80
    CHECK(io::valid_utf8("\xED\xA0\x80") == r + r + r);               // a surrogate
    CHECK(io::valid_utf8("\x80\x80") == r + r);                       // stray continuation bytes
}

TEST_CASE("attn plot draws invalid UTF-8 in --tokens, --title and GPT-2 byte labels as U+FFFD, as JSON and HTML do") {
    scratch_dir dir;
    const std::string r = "\xEF\xBF\xBD";
    // Before: "cannot write image (input string not valid UTF-8)". The reference is the
    // same plot with each bad sequence replaced by U+FFFD by hand.
    auto bad = run_attn("plot data/notebook.npz --tokens 'a \xe2\x82 c d\xff' --title 't\xc3' -o '" + (dir / "bad.png") + "'");
    CHECK_MESSAGE(bad.code == 0, bad.err);
    CHECK(bad.err.empty());
    const auto good = run_attn("plot data/notebook.npz --tokens 'a " + r + " c d" + r + "' --title 't" + r + "' -o '" + (dir / "good.png") + "'");
    REQUIRE(good.code == 0);
    CHECK(slurp(dir / "bad.png") == slurp(dir / "good.png"));
    for (const char* ext : {"svg", "pdf"})
        CHECK(run_attn("plot data/notebook.npz --tokens 'a \xe2\x82 c d' --title 't\xc3' -o '" + (dir / "b.") + ext + "'").code == 0);

    // GPT-2's byte-level token 127, "Ã", is the byte C3 alone (half of "é"), against a
    // vocabulary whose token 127 is U+FFFD: the same picture.
    std::string vocab = slurp(std::string(ATTN_SOURCE_DIR) + "/data/gpt2-tiny/tokenizer.json");
    const std::string full = "\"\xC3\x83\"";  // "Ã": the byte C3
    const std::size_t at = vocab.find(full);
    REQUIRE(at != std::string::npos);
    std::string half = vocab, replaced = vocab;
    replaced.replace(at, full.size(), "\"" + r + "\"");  // U+FFFD
    attn_test::spit(dir / "half.json", half);
    attn_test::spit(dir / "replaced.json", replaced);
    const std::string ck = "plot data/gpt2-tiny/model.safetensors --layer 0 --ids 1,127 --vocab '";
    bad = run_attn(ck + (dir / "half.json") + "' -o '" + (dir / "v1.png") + "'");
    CHECK_MESSAGE(bad.code == 0, bad.err);
    REQUIRE(run_attn(ck + (dir / "replaced.json") + "' -o '" + (dir / "v2.png") + "'").code == 0);
    CHECK(slurp(dir / "v1.png") == slurp(dir / "v2.png"));
}
