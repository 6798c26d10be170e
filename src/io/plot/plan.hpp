#pragma once
// Private to the heatmap writer (layout.cpp, draw.cpp, document.cpp): the layout plan that
// drawing reads, the text helpers both measure with, and cairo's one lock.

#include <cmath>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <cairo.h>

#include "attn/io/plot.hpp"

namespace attn::io::plot_detail {

constexpr rgb8 text_color{40, 40, 40};
constexpr rgb8 caption_color{110, 110, 110};
constexpr const char* font_family = "DejaVu Sans";
constexpr int label_pad = 6;     // between labels and the matrix
constexpr int colorbar_gap = 28; // between the panels and the colour bar
constexpr int tick_length = 4;
constexpr int swatch = 14;       // the "masked" legend square

std::string number_text(double v);
std::string range_text(std::size_t n);

/// The process's one lock for drawing. Cairo's toy text API shares its font caches
/// (cairo_select_font_face, cairo_text_extents, through fontconfig and FreeType) between
/// contexts, and helgrind sees batch workers that draw at once race in them: every
/// figure is measured and drawn under this lock, one at a time.
std::mutex& cairo_mutex();

struct surface_deleter {
    void operator()(cairo_surface_t* s) const { cairo_surface_destroy(s); }
};
struct context_deleter {
    void operator()(cairo_t* c) const { cairo_destroy(c); }
};
using surface_ptr = std::unique_ptr<cairo_surface_t, surface_deleter>;
using context_ptr = std::unique_ptr<cairo_t, context_deleter>;

/// Unhinted metrics: the layout must not depend on the surface type.
void set_font(cairo_t* cr, double size, bool bold = false);
double text_width(cairo_t* cr, const std::string& s);
void set_color(cairo_t* cr, rgb8 c);

/// The matrix dimensions of a spec, validated.
struct dims {
    std::size_t B = 1, H = 1, Tq = 0, Tk = 0;
};

std::size_t offset_of(const dims& d, std::size_t b, std::size_t h);
bool cell_masked(const heatmap_spec& s, std::size_t i, double v);
std::string label(const std::vector<std::string>& labels, std::size_t i);

/// A colour-bar tick: its position on the colour scale (log10 of the value with --log)
/// and its text.
struct tick {
    double pos;
    std::string text;
};

/// "%.*f", without the sign of a negative number that rounds to zero.
std::string annotation_text(double v, int decimals);

/// The layout plus what drawing needs beyond it.
struct plan {
    heatmap_layout layout;
    dims d;
    std::vector<std::size_t> heads;
    double vmin = 0, vmax = 1;  // on the colour scale: log10 of values with log
    bool log = false;
    bool any_masked = false, any_nonpositive = false;
    bool grid_panels = false;
    double k = 1;  // px per pt
    double font = plot_units::font_size, title_font = plot_units::title_size;
    std::vector<std::size_t> rows_drawn, cols_drawn;
    bool col_horizontal = true;
    int row_label_w = 0, col_label_h = 0;
    int panel_title_h = 0;
    double ascent = 0, descent = 0, title_ascent = 0;
    int matrix_dx = 0, matrix_dy = 0;  // matrix corner within its panel
    int title_top = 0;
    std::vector<tick> ticks, ticks_drawn;
    std::string legend;  // "masked", "masked or ≤ 0", or empty: no legend
    int decimals = 2;

    /// A length of `v` points in pixels.
    int u(double v) const { return static_cast<int>(std::lround(v * k)); }
};

/// The y of the middle of row i's label: the row's centre, but with cells smaller than
/// the text never so high that the label reaches into the column labels' corner.
double row_label_center(const plan& p, const heatmap_layout::panel& panel, std::size_t i, int cell);
/// Whether cell i is drawn masked: masked, or without a logarithm on a log scale.
bool drawn_masked(const heatmap_spec& s, const plan& p, std::size_t i, double v);

/// The layout of `s` and what drawing it needs (layout_heatmap's errors); under cairo_mutex.
plan make_plan(const heatmap_spec& s);

}  // namespace attn::io::plot_detail
