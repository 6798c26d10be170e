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

#include "attn/pipeline.hpp"
#include "attn/error.hpp"
#include "attn/io/input.hpp"
#include "attn/io/npz.hpp"
#include "attn/io/plot.hpp"
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
    o.causal = causal;
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
    CHECK_THROWS_WITH_AS(io::write_heatmap(dir / "w.png", s), "--head: out of range (expected 0, got 1)", value_error);
    s.head = 0;
    s.batch = 2;
    CHECK_THROWS_WITH_AS(io::layout_heatmap(s), "--batch: out of range (expected 0, got 2)", value_error);
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
    CHECK_THROWS_WITH_AS(io::heatmap_from_document(doc, v), "--head: out of range (expected 0, got 1)", value_error);
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
    const auto head = run_attn("plot data/notebook.npz --heads 2 --head 2 -o '" + (dir / "out.png") + "'");
    CHECK(head.code == 1);
    CHECK(head.err == "attn: error: --head: out of range (expected 0 to 1, got 2)\n");
    const auto batch = run_attn("plot data/notebook.npz --batch 1 -o '" + (dir / "out.png") + "'");
    CHECK(batch.code == 1);
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

TEST_CASE("plot: a non-finite --vmin or --vmax is a usage error") {
    for (const char* opt : {"--vmax inf", "--vmin -inf", "--vmax nan"}) {
        CAPTURE(opt);
        const auto r = run_attn(std::string("plot data/notebook.npz ") + opt + " -o /tmp/attn-never-written.png");
        CHECK(r.code == 2);
        CHECK(r.err.rfind("attn: error: --vm", 0) == 0);
        CHECK(r.err.find(": not a finite number (expected a finite number, got ") != std::string::npos);
        CHECK_FALSE(fs::exists("/tmp/attn-never-written.png"));
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
