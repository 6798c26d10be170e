// Heatmaps through cairo: one layout shared by the PNG, SVG and PDF surfaces.
#include "attn/io/plot.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <limits>
#include <memory>
#include <mutex>
#include <ostream>

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>
#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/text.hpp"
#include "attn/io/output.hpp"
#include "attn/io/writers.hpp"

namespace attn::io {

namespace {

constexpr rgb8 viridis17[17] = {{68, 1, 84},    {72, 24, 106},   {71, 45, 123},  {66, 64, 134},  {59, 82, 139},
                                {51, 99, 141},  {44, 114, 142},  {38, 130, 142}, {33, 145, 140}, {31, 160, 136},
                                {40, 174, 128}, {63, 188, 115},  {94, 201, 98},  {132, 212, 75}, {173, 220, 48},
                                {216, 226, 25}, {253, 231, 37}};

constexpr rgb8 text_color{40, 40, 40};
constexpr rgb8 caption_color{110, 110, 110};
constexpr const char* font_family = "DejaVu Sans";
constexpr int label_pad = 6;     // between labels and the matrix
constexpr int colorbar_gap = 28; // between the panels and the colour bar
constexpr int tick_length = 4;
constexpr int swatch = 14;       // the "masked" legend square

// Rasterised matrices above this many cells per panel: SVG/PDF rectangles would be huge.
constexpr std::size_t max_vector_cells = 128 * 128;

std::string number_text(double v) { return general_number(v, 4); }

std::string range_text(std::size_t n) { return n <= 1 ? "0" : "0 to " + std::to_string(n - 1); }

/// The process's one lock for drawing. Cairo's toy text API shares its font caches
/// (cairo_select_font_face, cairo_text_extents, through fontconfig and FreeType) between
/// contexts, and helgrind sees batch workers that draw at once race in them: every
/// figure is measured and drawn under this lock, one at a time.
std::mutex& cairo_mutex() {
    static std::mutex m;
    return m;
}

struct surface_deleter {
    void operator()(cairo_surface_t* s) const { cairo_surface_destroy(s); }
};
struct context_deleter {
    void operator()(cairo_t* c) const { cairo_destroy(c); }
};
using surface_ptr = std::unique_ptr<cairo_surface_t, surface_deleter>;
using context_ptr = std::unique_ptr<cairo_t, context_deleter>;

/// Unhinted metrics: the layout must not depend on the surface type.
void set_font(cairo_t* cr, double size, bool bold = false) {
    cairo_select_font_face(cr, font_family, CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
    cairo_font_options_t* opts = cairo_font_options_create();
    cairo_font_options_set_hint_metrics(opts, CAIRO_HINT_METRICS_OFF);
    cairo_font_options_set_hint_style(opts, CAIRO_HINT_STYLE_NONE);
    cairo_set_font_options(cr, opts);
    cairo_font_options_destroy(opts);
}

// Cairo refuses ill-formed UTF-8 ("input string not valid UTF-8") and stops drawing:
// every text passes through valid_utf8 here and in show_text_at.
double text_width(cairo_t* cr, const std::string& s) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, valid_utf8(s).c_str(), &e);
    return e.x_advance;
}

void set_color(cairo_t* cr, rgb8 c) { cairo_set_source_rgb(cr, c.r / 255.0, c.g / 255.0, c.b / 255.0); }

/// The matrix dimensions of a spec, validated.
struct dims {
    std::size_t B = 1, H = 1, Tq = 0, Tk = 0;
};

dims check_spec(const heatmap_spec& s) {
    dims d;
    const shape_t& sh = s.values.shape;
    if (sh.size() == 2) {
        d.Tq = sh[0];
        d.Tk = sh[1];
    } else if (sh.size() == 4) {
        d = {sh[0], sh[1], sh[2], sh[3]};
    } else {
        throw shape_error("plot", "values are not a matrix " + expected_got("(Tq, Tk) or (B, H, Tq, Tk)", shape_string(sh)));
    }
    if (s.values.size() == 0) throw shape_error("plot", "nothing to draw " + expected_got("a non-empty matrix", shape_string(sh)));
    if (s.values.data.size() != s.values.size() * dtype_size(s.values.type))
        throw value_error("plot", "values do not match their shape");
    if (!s.masked.empty() && s.masked.size() != s.values.size())
        throw shape_error("plot", "one masked flag per cell " + expected_got(std::to_string(s.values.size()), std::to_string(s.masked.size())));
    if (!s.row_labels.empty() && s.row_labels.size() != d.Tq)
        throw shape_error("plot", "one row label per query " + expected_got(std::to_string(d.Tq), std::to_string(s.row_labels.size())));
    if (!s.col_labels.empty() && s.col_labels.size() != d.Tk)
        throw shape_error("plot", "one column label per key " + expected_got(std::to_string(d.Tk), std::to_string(s.col_labels.size())));
    if (s.batch >= d.B)
        throw usage_error("--batch", "out of range " + expected_got(range_text(d.B), std::to_string(s.batch)));
    if (!s.grid && s.head >= d.H)
        throw usage_error("--head", "out of range " + expected_got(range_text(d.H), std::to_string(s.head)));
    return d;
}

std::vector<std::size_t> heads_drawn(const heatmap_spec& s, const dims& d) {
    std::vector<std::size_t> h;
    if (s.grid)
        for (std::size_t i = 0; i < d.H; ++i) h.push_back(i);
    else
        h.push_back(s.head);
    return h;
}

std::size_t offset_of(const dims& d, std::size_t b, std::size_t h) { return ((b * d.H) + h) * d.Tq * d.Tk; }

bool cell_masked(const heatmap_spec& s, std::size_t i, double v) {
    return std::isnan(v) || v == -std::numeric_limits<double>::infinity() || (!s.masked.empty() && s.masked[i]);
}

std::string label(const std::vector<std::string>& labels, std::size_t i) {
    return labels.empty() ? std::to_string(i) : labels[i];
}

/// Shortest "%.*f" that shows a tick step's digits; "%g" for very large or small values.
std::string tick_text(double v, double step) {
    char buf[64];
    const double mag = std::floor(std::log10(step) + 1e-9);
    if (std::abs(v) >= 1e6 || mag < -5) {
        std::snprintf(buf, sizeof buf, "%.3g", v);
    } else {
        const int decimals = mag >= 0 ? 0 : static_cast<int>(-mag);
        std::snprintf(buf, sizeof buf, "%.*f", decimals, v == 0 ? 0.0 : v);
    }
    std::string s = buf;
    if (s == "-0") s = "0";
    return s;
}

/// About five round ticks (1, 2, 5 × 10^k apart) within [lo, hi], never more than 12.
/// A range too wide for a double (hi − lo overflows) or too narrow to step through at its
/// magnitude (lo + step == lo, or the tick index beyond 2^53) gets its two ends instead.
std::vector<double> nice_ticks(double lo, double hi, double& step) {
    const double raw = (hi - lo) / 5;
    const auto ends = [&] {
        step = hi - lo;
        return std::vector<double>{lo, hi};
    };
    if (!std::isfinite(raw) || !(raw > 0)) return ends();
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double norm = raw / mag;
    step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
    const double first = std::ceil(lo / step - 1e-9);
    if (!(step > 0) || lo + step == lo || std::abs(first) >= 0x1p53) return ends();
    std::vector<double> ticks;
    for (double k = first; ticks.size() < 12; ++k) {
        const double v = k * step;
        if (v > hi + step * 1e-9) break;
        ticks.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
    }
    return ticks;
}

/// A colour-bar tick: its position on the colour scale (log10 of the value with --log)
/// and its text.
struct tick {
    double pos;
    std::string text;
};

/// "%.*f", without the sign of a negative number that rounds to zero.
std::string annotation_text(double v, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    std::string s = buf;
    if (s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
    return s;
}

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
double row_label_center(const plan& p, const heatmap_layout::panel& panel, std::size_t i, int cell) {
    return std::max(panel.y + (static_cast<double>(i) + 0.5) * cell, panel.y - p.u(label_pad) + (p.ascent + p.descent) / 2);
}

/// Whether cell i is drawn masked: masked, or without a logarithm on a log scale.
bool drawn_masked(const heatmap_spec& s, const plan& p, std::size_t i, double v) {
    return cell_masked(s, i, v) || (p.log && !(v > 0));
}

/// Colour-bar ticks over [p.vmin, p.vmax]: round numbers, or on a log scale the powers
/// of ten (at most about eight), or round numbers when fewer than two decades show.
std::vector<tick> make_ticks(const plan& p) {
    std::vector<tick> ticks;
    double step = 1;
    if (!p.log) {
        for (double t : nice_ticks(p.vmin, p.vmax, step)) ticks.push_back({t, tick_text(t, step)});
        return ticks;
    }
    const double first = std::ceil(p.vmin - 1e-9), last = std::floor(p.vmax + 1e-9);
    if (last - first >= 1) {
        const double every = std::max(1.0, std::ceil((last - first + 1) / 8));
        for (double e = first; e <= last; e += every) ticks.push_back({e, number_text(std::pow(10.0, e))});
        return ticks;
    }
    for (double t : nice_ticks(std::pow(10.0, p.vmin), std::pow(10.0, p.vmax), step)) {
        const double pos = t > 0 ? std::log10(t) : -std::numeric_limits<double>::infinity();
        if (std::isfinite(pos) && pos >= p.vmin - 1e-9 && pos <= p.vmax + 1e-9) ticks.push_back({pos, tick_text(t, step)});
    }
    return ticks;
}

void check_figure_options(const heatmap_spec& s) {
    if (!(s.dpi >= 1 && s.dpi <= plot_units::max_dpi))
        throw usage_error("--dpi", "not a resolution " + expected_got("a number of dots per inch from 1 to 1200", number_text(s.dpi)));
    if (s.size) {
        const figure_size z = *s.size;
        const std::string got = std::to_string(z.width) + "x" + std::to_string(z.height);
        if (z.width < 1 || z.height < 1)
            throw usage_error("--size", "not positive " + expected_got("1 to 16384 pixels per side", got));
        if (z.width > plot_units::max_side || z.height > plot_units::max_side)
            throw usage_error("--size", "too large " + expected_got("1 to 16384 pixels per side", got));
    }
    if (s.annotate && (s.annotate_decimals < 0 || s.annotate_decimals > plot_units::max_decimals))
        throw usage_error("--annotate-decimals", "out of range " + expected_got("0 to 10", std::to_string(s.annotate_decimals)));
}

plan make_plan(const heatmap_spec& s) {
    plan p;
    p.d = check_spec(s);
    check_figure_options(s);
    const dims& d = p.d;
    p.heads = heads_drawn(s, d);
    p.grid_panels = p.heads.size() > 1;
    p.log = s.log;
    p.k = s.dpi / plot_units::default_dpi;
    p.decimals = s.annotate_decimals;

    // Colour range over the panels drawn.
    for (const auto& [name, v] : {std::pair{"--vmin", s.vmin}, std::pair{"--vmax", s.vmax}}) {
        if (v && !std::isfinite(*v))
            throw usage_error(name, "not a finite number " + expected_got("a finite number", number_text(*v)));
        if (v && s.log && !(*v > 0))
            throw usage_error(name, "not positive, which --log needs " + expected_got("a number > 0", number_text(*v)));
    }
    if (s.vmin && s.vmax && !(*s.vmin < *s.vmax))
        throw usage_error("--vmin", "not below --vmax " + expected_got("vmin < vmax", number_text(*s.vmin) + " and " + number_text(*s.vmax)));
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    double raw_lo = lo, raw_hi = hi;  // of the finite values drawn, for the annotations' width
    for (std::size_t h : p.heads) {
        const std::size_t base = offset_of(d, s.batch, h);
        for (std::size_t i = base; i < base + d.Tq * d.Tk; ++i) {
            const double v = s.values.value(i);
            if (drawn_masked(s, p, i, v)) {
                (cell_masked(s, i, v) ? p.any_masked : p.any_nonpositive) = true;
                continue;
            }
            if (!std::isfinite(v)) continue;
            raw_lo = std::min(raw_lo, v);
            raw_hi = std::max(raw_hi, v);
            const double t = p.log ? std::log10(v) : v;
            lo = std::min(lo, t);
            hi = std::max(hi, t);
        }
    }
    const auto on_scale = [&](std::optional<double> v) -> std::optional<double> {
        if (v && p.log) return std::log10(*v);
        return v;
    };
    const std::optional<double> given_min = on_scale(s.vmin), given_max = on_scale(s.vmax);
    if (lo > hi) lo = p.log ? -1 : 0, hi = p.log ? 0 : 1;  // nothing finite to show
    // A missing end is the data's, unless the data lie all beyond the given end: then one unit (decade) from it.
    p.vmin = given_min.value_or(given_max && !(lo < *given_max) ? *given_max - 1 : lo);
    p.vmax = given_max.value_or(given_min && !(hi > p.vmin) ? p.vmin + 1 : hi);
    if (!(p.vmax > p.vmin)) {
        // One value: widen around it, by a step its magnitude can hold (half a decade on a log scale).
        const double pad = p.log ? 0.5 : std::max(0.5, std::abs(p.vmin) * 1e-3);
        p.vmin -= pad;
        p.vmax += pad;
    }
    p.ticks = make_ticks(p);
    if (p.any_masked || p.any_nonpositive) p.legend = p.any_nonpositive ? "masked or ≤ 0" : "masked";

    // Text metrics from a scratch surface.
    p.font = plot_units::font_size * p.k;
    p.title_font = plot_units::title_size * p.k;
    surface_ptr scratch(cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1));
    context_ptr ctx(cairo_create(scratch.get()));
    cairo_t* cr = ctx.get();
    set_font(cr, p.title_font, true);
    cairo_font_extents_t fe;
    cairo_font_extents(cr, &fe);
    p.title_ascent = fe.ascent;
    const double title_h = fe.ascent + fe.descent;
    const double title_w = s.title.empty() ? 0 : text_width(cr, s.title);
    set_font(cr, p.font);
    cairo_font_extents(cr, &fe);
    p.ascent = fe.ascent;
    p.descent = fe.descent;
    const int fh = static_cast<int>(std::ceil(fe.ascent + fe.descent));

    std::vector<double> row_w(d.Tq), col_w(d.Tk);
    for (std::size_t i = 0; i < d.Tq; ++i) row_w[i] = text_width(cr, label(s.row_labels, i));
    for (std::size_t j = 0; j < d.Tk; ++j) col_w[j] = text_width(cr, label(s.col_labels, j));
    const double max_col_w = col_w.empty() ? 0 : *std::max_element(col_w.begin(), col_w.end());
    double tick_w = 0;
    for (const tick& t : p.ticks) tick_w = std::max(tick_w, text_width(cr, t.text));
    const double colorbar_label_w = text_width(cr, s.colorbar_label);
    const double legend_w = p.legend.empty() ? 0 : text_width(cr, p.legend);

    const std::size_t n = p.heads.size();
    const std::size_t ncols = p.grid_panels ? static_cast<std::size_t>(std::ceil(std::sqrt(static_cast<double>(n)))) : 1;
    const std::size_t nrows = (n + ncols - 1) / ncols;
    const int label_extent = fh + p.u(plot_units::label_gap);

    // Everything for cells of `cell` px, a colour bar at least cb_min px high and the
    // content's top-left corner at (ox, oy); returns the content's width and height.
    const auto arrange = [&](int cell, int cb_min, int ox, int oy) -> std::pair<long, long> {
        p.rows_drawn = labels_drawn(d.Tq, cell, label_extent);
        double rw = 0;
        for (std::size_t i : p.rows_drawn) rw = std::max(rw, row_w[i]);
        p.row_label_w = static_cast<int>(std::ceil(rw));
        p.col_horizontal = max_col_w + p.u(6) <= cell;
        if (p.col_horizontal) {
            p.cols_drawn = labels_drawn(d.Tk, cell, max_col_w + p.u(6));
            p.col_label_h = fh;
        } else {
            p.cols_drawn = labels_drawn(d.Tk, cell, label_extent);
            double cw = 0;
            for (std::size_t j : p.cols_drawn) cw = std::max(cw, col_w[j]);
            p.col_label_h = static_cast<int>(std::ceil(cw));
        }
        p.panel_title_h = p.grid_panels ? fh + p.u(6) : 0;

        // One panel: caption "queries" | row labels | matrix, under title / "keys" / column labels.
        const int caption_w = fh + p.u(4);
        p.matrix_dx = caption_w + p.row_label_w + p.u(label_pad);
        p.matrix_dy = p.panel_title_h + fh + p.u(4) + p.col_label_h + p.u(label_pad);
        const int matrix_w = static_cast<int>(d.Tk) * cell, matrix_h = static_cast<int>(d.Tq) * cell;
        const int panel_w = p.matrix_dx + matrix_w, panel_h = p.matrix_dy + matrix_h;
        const int margin = p.u(plot_units::margin), gap = p.u(plot_units::panel_gap);
        p.title_top = oy + margin;
        const int top = oy + margin + (s.title.empty() ? 0 : static_cast<int>(std::ceil(title_h)) + p.u(10));

        heatmap_layout& l = p.layout;
        l = heatmap_layout{};
        l.scale = p.k;
        l.cell = cell;
        l.rows = d.Tq;
        l.cols = d.Tk;
        l.colorbar_width = p.u(plot_units::colorbar_width);
        for (std::size_t q = 0; q < n; ++q) {
            const int c = static_cast<int>(q % ncols), r = static_cast<int>(q / ncols);
            l.panels.push_back({p.heads[q], ox + margin + c * (panel_w + gap) + p.matrix_dx, top + r * (panel_h + gap) + p.matrix_dy});
        }
        const int panels_right = ox + margin + static_cast<int>(ncols) * panel_w + static_cast<int>(ncols - 1) * gap;
        const int panels_bottom = top + static_cast<int>(nrows) * panel_h + static_cast<int>(nrows - 1) * gap;

        l.colorbar_x = panels_right + p.u(colorbar_gap);
        l.colorbar_y = l.panels.front().y;
        const int last_matrix_bottom = l.panels.back().y + matrix_h;
        l.colorbar_height = std::max(last_matrix_bottom - l.colorbar_y, cb_min);
        const int cb_bottom = l.colorbar_y + l.colorbar_height;

        int right = l.colorbar_x + l.colorbar_width + p.u(tick_length) + p.u(3) + static_cast<int>(std::ceil(tick_w));
        right = std::max(right, l.colorbar_x + static_cast<int>(std::ceil(colorbar_label_w)));
        int bottom = std::max(panels_bottom, cb_bottom + static_cast<int>(std::ceil(p.descent)) + p.u(2));
        if (!p.legend.empty()) {
            right = std::max(right, l.colorbar_x + p.u(swatch) + p.u(6) + static_cast<int>(std::ceil(legend_w)));
            bottom = std::max(bottom, cb_bottom + p.u(14) + p.u(swatch));
        }

        // Label boxes, as draw() places the text.
        const double text_h = p.ascent + p.descent;
        for (const auto& panel : l.panels) {
            for (std::size_t i : p.rows_drawn) {
                const double cy = row_label_center(p, panel, i, cell);
                l.row_labels.push_back({i, panel.x - p.u(label_pad) - row_w[i], cy - text_h / 2, row_w[i], text_h});
            }
            for (std::size_t j : p.cols_drawn) {
                const double cx = panel.x + (static_cast<double>(j) + 0.5) * cell;
                if (p.col_horizontal)
                    l.col_labels.push_back({j, cx - col_w[j] / 2, panel.y - p.u(label_pad) - p.descent - p.ascent, col_w[j], text_h});
                else
                    l.col_labels.push_back({j, cx - text_h / 2, panel.y - p.u(label_pad) - col_w[j], text_h, col_w[j]});
            }
        }
        // Colour-bar ticks, bottom up, each at least a label's height above the last drawn.
        p.ticks_drawn.clear();
        double last_y = std::numeric_limits<double>::infinity();
        for (const tick& t : p.ticks) {
            const double y = cb_bottom - (t.pos - p.vmin) / (p.vmax - p.vmin) * l.colorbar_height;
            if (last_y - y < label_extent) continue;
            p.ticks_drawn.push_back(t);
            last_y = y;
        }
        return {static_cast<long>(right) + margin - ox, static_cast<long>(bottom) + margin - oy};
    };

    heatmap_layout& l = p.layout;
    const int margin = p.u(plot_units::margin);
    if (!s.size) {
        const int target = p.u(p.grid_panels ? plot_units::grid_target : plot_units::single_target);
        const int cell = std::clamp(static_cast<int>(target / std::max(d.Tq, d.Tk)), 1, std::max(1, p.u(plot_units::max_cell)));
        const auto [w, h] = arrange(cell, p.u(plot_units::colorbar_min_height), 0, 0);
        l.width = static_cast<int>(std::max(w, static_cast<long>(std::ceil(title_w)) + 2 * margin));
        l.height = static_cast<int>(h);
    } else {
        const long W = s.size->width, H = s.size->height;
        const long upper = std::max<long>(1, std::min<long>(W / static_cast<long>(d.Tk * ncols), H / static_cast<long>(d.Tq * nrows)));
        int cell = 0, cb_min = 0;
        for (int bar : {p.u(plot_units::colorbar_min_height), 0}) {
            for (long c = std::min<long>(upper, std::numeric_limits<int>::max()); c >= 1 && !cell; --c) {
                const auto [w, h] = arrange(static_cast<int>(c), bar, 0, 0);
                if (w <= W && h <= H) cell = static_cast<int>(c), cb_min = bar;
            }
            if (cell) break;
        }
        if (!cell) {
            const auto [w, h] = arrange(1, 0, 0, 0);
            throw value_error("--size", "too small for this matrix " +
                                            expected_got("at least " + std::to_string(w) + "x" + std::to_string(h),
                                                         std::to_string(W) + "x" + std::to_string(H)));
        }
        const auto [w, h] = arrange(cell, cb_min, 0, 0);
        arrange(cell, cb_min, static_cast<int>((W - w) / 2), static_cast<int>((H - h) / 2));
        l.width = static_cast<int>(W);
        l.height = static_cast<int>(H);
        if (title_w + 2 * margin > W) p.title_font *= std::max(1.0, static_cast<double>(W - 2 * margin)) / title_w;
    }

    if (s.annotate) {
        // Digits share one advance width in DejaVu Sans: the widest number is at an end.
        double w = 0;
        if (raw_lo <= raw_hi)
            for (double v : {raw_lo, raw_hi}) w = std::max(w, text_width(cr, annotation_text(v, p.decimals)));
        l.annotation_cell = std::max(static_cast<int>(std::ceil(w)) + p.u(4), fh + p.u(2));
        l.annotated = l.cell >= l.annotation_cell;
    }
    return p;
}

void show_text_at(cairo_t* cr, double x, double y, const std::string& s) {
    cairo_move_to(cr, x, y);
    cairo_show_text(cr, valid_utf8(s).c_str());
}

/// Text running upwards with its glyph box centred on x, starting at y.
void show_text_up(cairo_t* cr, double x, double y, const std::string& s, const plan& p) {
    cairo_save(cr);
    cairo_translate(cr, x + (p.ascent - p.descent) / 2, y);
    cairo_rotate(cr, -M_PI / 2);
    show_text_at(cr, 0, 0, s);
    cairo_restore(cr);
}

rgb8 cell_color(const heatmap_spec& s, const plan& p, std::size_t i) {
    const double v = s.values.value(i);
    if (drawn_masked(s, p, i, v)) return masked_color;
    const double t = p.log ? std::log10(v) : v;
    return colormap((t - p.vmin) / (p.vmax - p.vmin));
}

/// The numbers in the cells (layout.annotated): white on dark cells, dark grey on light.
void draw_annotations(cairo_t* cr, const heatmap_spec& s, const plan& p, const heatmap_layout::panel& panel) {
    if (!p.layout.annotated) return;
    const dims& d = p.d;
    const int cell = p.layout.cell;
    const std::size_t base = offset_of(d, s.batch, panel.head);
    set_font(cr, p.font);
    for (std::size_t i = 0; i < d.Tq; ++i)
        for (std::size_t j = 0; j < d.Tk; ++j) {
            const std::size_t k = base + i * d.Tk + j;
            const double v = s.values.value(k);
            if (drawn_masked(s, p, k, v) || !std::isfinite(v)) continue;
            const rgb8 c = cell_color(s, p, k);
            set_color(cr, 0.299 * c.r + 0.587 * c.g + 0.114 * c.b < 128 ? rgb8{255, 255, 255} : text_color);
            const std::string t = annotation_text(v, p.decimals);
            show_text_at(cr, panel.x + (static_cast<double>(j) + 0.5) * cell - text_width(cr, t) / 2,
                         panel.y + (static_cast<double>(i) + 0.5) * cell + (p.ascent - p.descent) / 2, t);
        }
}
void draw_cells(cairo_t* cr, const heatmap_spec& s, const plan& p, const heatmap_layout::panel& panel) {
    const dims& d = p.d;
    const int cell = p.layout.cell;
    const std::size_t base = offset_of(d, s.batch, panel.head);
    if (d.Tq * d.Tk <= max_vector_cells) {
        cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE);  // no hairline seams between cells
        for (std::size_t i = 0; i < d.Tq; ++i)
            for (std::size_t j = 0; j < d.Tk; ++j) {
                set_color(cr, cell_color(s, p, base + i * d.Tk + j));
                cairo_rectangle(cr, panel.x + static_cast<int>(j) * cell, panel.y + static_cast<int>(i) * cell, cell, cell);
                cairo_fill(cr);
            }
        cairo_set_antialias(cr, CAIRO_ANTIALIAS_DEFAULT);
    } else {
        // One pixel per cell, scaled up without interpolation.
        surface_ptr img(cairo_image_surface_create(CAIRO_FORMAT_RGB24, static_cast<int>(d.Tk), static_cast<int>(d.Tq)));
        if (cairo_surface_status(img.get()) != CAIRO_STATUS_SUCCESS)
            throw io_error("plot", std::string("cannot draw the matrix (") + cairo_status_to_string(cairo_surface_status(img.get())) + ")");
        cairo_surface_flush(img.get());
        unsigned char* data = cairo_image_surface_get_data(img.get());
        const int stride = cairo_image_surface_get_stride(img.get());
        for (std::size_t i = 0; i < d.Tq; ++i) {
            auto* row = reinterpret_cast<std::uint32_t*>(data + i * static_cast<std::size_t>(stride));
            for (std::size_t j = 0; j < d.Tk; ++j) {
                const rgb8 c = cell_color(s, p, base + i * d.Tk + j);
                row[j] = (std::uint32_t{c.r} << 16) | (std::uint32_t{c.g} << 8) | c.b;
            }
        }
        cairo_surface_mark_dirty(img.get());
        cairo_save(cr);
        cairo_translate(cr, panel.x, panel.y);
        cairo_scale(cr, cell, cell);
        cairo_set_source_surface(cr, img.get(), 0, 0);
        cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
        cairo_rectangle(cr, 0, 0, static_cast<double>(d.Tk), static_cast<double>(d.Tq));
        cairo_fill(cr);
        cairo_restore(cr);
    }
    draw_annotations(cr, s, p, panel);
    if (cell < p.u(plot_units::hatch_min_cell)) return;
    // "/" strokes x + y = (2m+1)·cell/(2n) in cell coordinates, n about one per 12 points:
    // they join into continuous diagonals across masked regions, and none passes through
    // the centre (x + y = cell would need 2n = 2m+1).
    set_color(cr, hatch_color);
    cairo_set_line_width(cr, p.k);
    const int n = std::max(1, static_cast<int>(std::lround(cell / (12.0 * p.k))));
    bool any = false;
    for (std::size_t i = 0; i < d.Tq; ++i)
        for (std::size_t j = 0; j < d.Tk; ++j) {
            const std::size_t k = base + i * d.Tk + j;
            if (!drawn_masked(s, p, k, s.values.value(k))) continue;
            const double x = panel.x + static_cast<double>(j) * cell, y = panel.y + static_cast<double>(i) * cell;
            for (int m = 0; m < 2 * n; ++m) {
                const double c = (2 * m + 1) * cell / (2.0 * n);
                if (c < cell) {
                    cairo_move_to(cr, x, y + c);
                    cairo_line_to(cr, x + c, y);
                } else {
                    cairo_move_to(cr, x + c - cell, y + cell);
                    cairo_line_to(cr, x + cell, y + c - cell);
                }
            }
            any = true;
        }
    if (any) cairo_stroke(cr);
}

void draw_hatched_swatch(cairo_t* cr, double x, double y, double size, double line) {
    set_color(cr, masked_color);
    cairo_rectangle(cr, x, y, size, size);
    cairo_fill(cr);
    cairo_save(cr);
    cairo_rectangle(cr, x, y, size, size);
    cairo_clip(cr);
    set_color(cr, hatch_color);
    cairo_set_line_width(cr, line);
    for (double k = -size; k <= size; k += size / 3) {
        cairo_move_to(cr, x + k, y + size);
        cairo_line_to(cr, x + k + size, y);
    }
    cairo_stroke(cr);
    cairo_restore(cr);
}

void draw(cairo_t* cr, const heatmap_spec& s, const plan& p) {
    const heatmap_layout& l = p.layout;
    const dims& d = p.d;
    set_color(cr, background_color);
    cairo_paint(cr);

    if (!s.title.empty()) {
        set_font(cr, p.title_font, true);
        set_color(cr, text_color);
        show_text_at(cr, (l.width - text_width(cr, s.title)) / 2, p.title_top + p.title_ascent, s.title);
    }

    const double baseline_mid = (p.ascent - p.descent) / 2;  // from a row's centre to its baseline
    const int matrix_w = static_cast<int>(d.Tk) * l.cell, matrix_h = static_cast<int>(d.Tq) * l.cell;
    for (const auto& panel : l.panels) {
        draw_cells(cr, s, p, panel);
        const double px = panel.x - p.matrix_dx, py = panel.y - p.matrix_dy;  // panel corner
        const double mid_x = panel.x + matrix_w / 2.0;
        if (p.grid_panels) {
            set_font(cr, p.font, true);
            set_color(cr, text_color);
            const std::string t = "head " + std::to_string(panel.head);
            show_text_at(cr, mid_x - text_width(cr, t) / 2, py + p.ascent, t);
        }
        set_font(cr, p.font);
        set_color(cr, caption_color);
        show_text_at(cr, mid_x - text_width(cr, s.col_caption) / 2, py + p.panel_title_h + p.ascent, s.col_caption);
        show_text_up(cr, px + (p.ascent + p.descent) / 2, panel.y + matrix_h / 2.0 + text_width(cr, s.row_caption) / 2,
                     s.row_caption, p);

        set_color(cr, text_color);
        for (std::size_t i : p.rows_drawn) {
            const std::string t = label(s.row_labels, i);
            const double cy = row_label_center(p, panel, i, l.cell);
            show_text_at(cr, panel.x - p.u(label_pad) - text_width(cr, t), cy + baseline_mid, t);
        }
        for (std::size_t j : p.cols_drawn) {
            const std::string t = label(s.col_labels, j);
            const double cx = panel.x + (static_cast<double>(j) + 0.5) * l.cell;
            if (p.col_horizontal)
                show_text_at(cr, cx - text_width(cr, t) / 2, panel.y - p.u(label_pad) - p.descent, t);
            else
                show_text_up(cr, cx, panel.y - p.u(label_pad), t, p);
        }
    }

    // Colour bar: the map's 17 samples as gradient stops reproduce colormap() exactly.
    const double cbx = l.colorbar_x, cby = l.colorbar_y, cbw = l.colorbar_width, cbh = l.colorbar_height;
    cairo_pattern_t* grad = cairo_pattern_create_linear(0, cby + cbh, 0, cby);
    for (int k = 0; k < 17; ++k)
        cairo_pattern_add_color_stop_rgb(grad, k / 16.0, viridis17[k].r / 255.0, viridis17[k].g / 255.0, viridis17[k].b / 255.0);
    cairo_rectangle(cr, cbx, cby, cbw, cbh);
    cairo_set_source(cr, grad);
    cairo_fill(cr);
    cairo_pattern_destroy(grad);
    set_color(cr, caption_color);
    cairo_set_line_width(cr, p.k);
    cairo_rectangle(cr, cbx + p.k / 2, cby + p.k / 2, cbw - p.k, cbh - p.k);
    cairo_stroke(cr);

    set_font(cr, p.font);
    set_color(cr, text_color);
    if (!s.colorbar_label.empty()) show_text_at(cr, cbx, cby - p.u(label_pad) - p.descent, s.colorbar_label);
    for (const tick& t : p.ticks_drawn) {
        const double y = std::round(cby + cbh - (t.pos - p.vmin) / (p.vmax - p.vmin) * cbh) + 0.5;
        set_color(cr, text_color);
        cairo_move_to(cr, cbx + cbw, y);
        cairo_line_to(cr, cbx + cbw + p.u(tick_length), y);
        cairo_stroke(cr);
        show_text_at(cr, cbx + cbw + p.u(tick_length) + p.u(3), y + baseline_mid, t.text);
    }
    if (!p.legend.empty()) {
        const double y = cby + cbh + p.u(14);
        draw_hatched_swatch(cr, cbx, y, p.u(swatch), p.k);
        set_color(cr, text_color);
        show_text_at(cr, cbx + p.u(swatch) + p.u(6), y + p.u(swatch) / 2.0 + baseline_mid, p.legend);
    }
}

cairo_status_t write_to_stream(void* closure, const unsigned char* data, unsigned int length) {
    auto* out = static_cast<std::ostream*>(closure);
    out->write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(length));
    return *out ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

void check(cairo_status_t status, const std::string& path) {
    if (status != CAIRO_STATUS_SUCCESS)
        throw io_error(path, std::string("cannot write image (") + cairo_status_to_string(status) + ")");
}

}  // namespace

rgb8 colormap(double t) {
    if (!(t > 0)) return viridis17[0];
    if (t >= 1) return viridis17[16];
    const double x = t * 16;
    const int i = std::min(static_cast<int>(x), 15);
    const double f = x - i;
    const rgb8 a = viridis17[i], b = viridis17[i + 1];
    auto mix = [f](std::uint8_t u, std::uint8_t v) {
        return static_cast<std::uint8_t>(std::lround(u + (static_cast<double>(v) - u) * f));
    };
    return {mix(a.r, b.r), mix(a.g, b.g), mix(a.b, b.b)};
}

image_format image_format_from_path(const std::string& path) {
    const std::size_t slash = path.rfind('/');
    const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    const std::size_t dot = name.rfind('.');
    const std::string ext = dot == std::string::npos || dot == 0 ? std::string() : lower(name.substr(dot));
    if (ext == ".png") return image_format::png;
    if (ext == ".svg") return image_format::svg;
    if (ext == ".pdf") return image_format::pdf;
    throw usage_error("-o", "unknown image format " +
                                expected_got(".png, .svg or .pdf", ext.empty() ? "no extension" : name.substr(dot)));
}

figure_size parse_figure_size(const std::string& text) {
    const std::size_t x = text.find_first_of("xX");
    const auto whole = [](const std::string& t, long& v) {
        if (t.empty() || t.size() > 9) return false;
        const std::size_t i = t[0] == '-' ? 1 : 0;  // a sign only to say "not positive"
        if (i == t.size() || t.find_first_not_of("0123456789", i) != std::string::npos) return false;
        v = std::stol(t);
        return true;
    };
    long w = 0, h = 0;
    if (x == std::string::npos || !whole(text.substr(0, x), w) || !whole(text.substr(x + 1), h))
        throw usage_error("--size", "not WIDTHxHEIGHT " + expected_got("two whole numbers of pixels like 800x600", text));
    if (w < 1 || h < 1) throw usage_error("--size", "not positive " + expected_got("1 to 16384 pixels per side", text));
    if (w > plot_units::max_side || h > plot_units::max_side)
        throw usage_error("--size", "too large " + expected_got("1 to 16384 pixels per side", text));
    return {static_cast<int>(w), static_cast<int>(h)};
}

double parse_dpi(const std::string& text) {
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(v >= 1 && v <= plot_units::max_dpi))
        throw usage_error("--dpi", "not a resolution " + expected_got("a number of dots per inch from 1 to 1200", text));
    return v;
}

std::optional<double> parse_color_limit(const std::string& option, const std::string& text) {
    if (text == "auto") return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || std::isspace(static_cast<unsigned char>(text[0])))
        throw usage_error(option, "not a number " + expected_got("a finite number or auto", text));
    if (!std::isfinite(v)) throw usage_error(option, "not a finite number " + expected_got("a finite number", text));
    return v;
}

std::vector<std::size_t> labels_drawn(std::size_t count, double spacing, double extent) {
    if (!(spacing > 0) || !std::isfinite(spacing) || !(extent >= 0) || !std::isfinite(extent))
        throw value_error("plot", "no room for labels " + expected_got("spacing > 0 and extent ≥ 0", number_text(spacing) + " and " + number_text(extent)));
    const double ratio = std::ceil(extent / spacing);
    std::size_t k = 1;  // a step past the last label draws only the first
    if (ratio > 1) k = ratio >= static_cast<double>(count) ? std::max<std::size_t>(count, 1) : static_cast<std::size_t>(ratio);
    std::vector<std::size_t> drawn;
    for (std::size_t i = 0; i < count; i += k) drawn.push_back(i);
    return drawn;
}

std::string valid_utf8(const std::string& s) {
    for (std::size_t i = 0; i < s.size();) {
        const std::size_t n = utf8_sequence_length(s, i);
        if (n == 0 || i + n > s.size()) {
            // One rule for every writer: nlohmann's, through a dump and a parse back.
            using json = nlohmann::json;
            return json::parse(json(s).dump(-1, ' ', false, json::error_handler_t::replace)).get<std::string>();
        }
        i += n;
    }
    return s;
}

heatmap_layout layout_heatmap(const heatmap_spec& spec) {
    const std::lock_guard<std::mutex> lock(cairo_mutex());
    return make_plan(spec).layout;
}

namespace {

const named_array* find_tensor(const document& doc, const std::string& name) {
    for (const auto& t : doc.tensors)
        if (t.name == name) return &t;
    return nullptr;
}

/// "a, b or c"
std::string or_list(const std::vector<std::string>& items) {
    std::string s;
    for (std::size_t i = 0; i < items.size(); ++i)
        s += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
    return s;
}

/// Settings part of the title, from meta (nothing when meta is empty, as for .npz).
std::string settings_text(const nlohmann::ordered_json& meta) {
    if (!meta.is_object()) return "";
    std::string s;
    if (meta.contains("mask") && meta["mask"].is_array()) {
        std::vector<std::string> masks;
        for (const auto& m : meta["mask"])
            if (m.is_string()) masks.push_back(m.get<std::string>());
        std::string m = masks.empty() ? "none" : "";
        for (std::size_t i = 0; i < masks.size(); ++i) m += (i ? "+" : "") + masks[i];
        if (meta.value("causal_align", std::string()) == "bottom-right") m += " (bottom-right)";
        s += " · mask: " + m;
    }
    if (meta.contains("mask_fill") && meta["mask_fill"].is_number())
        s += " · fill: " + number_text(meta["mask_fill"].get<double>());
    if (meta.contains("scale") && meta["scale"].is_number()) s += " · scale: " + number_text(meta["scale"].get<double>());
    if (meta.contains("softcap") && meta["softcap"].is_number() && meta["softcap"].get<double>() > 0)
        s += " · softcap: " + number_text(meta["softcap"].get<double>());
    return s;
}

/// Labels that do not fit the matrix: a usage error when they came from --tokens /
/// --tokens-kv (exit 2, as compute and view say it), a data error when from the file.
[[noreturn]] void throw_token_count(const heatmap_view& view, const std::string& option, const std::string& what) {
    if (view.tokens_from_options) throw usage_error(option, what);
    throw value_error(option, what);
}

/// The model and layer part of the title, from meta.model (checkpoint runs) or
/// meta.layer: " · gpt2 layer 1 of 12", nothing without them.
std::string model_text(const nlohmann::ordered_json& meta) {
    if (!meta.is_object()) return "";
    const auto text = [](const nlohmann::ordered_json& v) {
        return v.is_string() ? v.get<std::string>() : v.is_number_unsigned() ? std::to_string(v.get<std::size_t>()) : std::string();
    };
    std::string name, layer;
    if (meta.contains("model") && meta["model"].is_object()) {
        const auto& m = meta["model"];
        if (m.contains("model_type")) name = text(m["model_type"]);
        if (name.empty() && m.contains("arch")) name = text(m["arch"]);
        if (m.contains("layer")) layer = text(m["layer"]);
        if (!layer.empty() && layer != "all" && m.contains("layers") && !text(m["layers"]).empty())
            layer += " of " + text(m["layers"]);
    } else if (meta.contains("layer")) {
        layer = text(meta["layer"]);
    }
    std::string s = name;
    if (!layer.empty()) s += (s.empty() ? "" : " ") + std::string("layer ") + layer;
    return s.empty() ? "" : " · " + s;
}

}  // namespace

heatmap_spec heatmap_from_document(const document& doc, const heatmap_view& view) {
    const nlohmann::ordered_json& meta = doc.meta;
    const bool has_meta = meta.is_object();
    const named_array* t = find_tensor(doc, view.stage);
    const std::vector<std::string> plotted = plot_stages();
    if (!t || std::find(plotted.begin(), plotted.end(), view.stage) == plotted.end()) {
        std::vector<std::string> present;
        for (const std::string& m : plotted)
            if (find_tensor(doc, m)) present.push_back(m);
        throw value_error("--stage", "not in the input " +
                                         expected_got(present.empty() ? "a " + or_list(plotted) + " tensor" : or_list(present),
                                                      view.stage));
    }

    heatmap_spec spec;
    spec.values = t->value;
    const shape_t sh = t->value.shape;
    const bool averaged = has_meta && meta.value("average_heads", false);
    if (sh.size() == 3) {
        // (H, Tq, Tk) or (B, Tq, Tk), as its axes say (tensor_axes).
        if (tensor_axes(doc, *t).front() == "H") spec.values.shape = {1, sh[0], sh[1], sh[2]};
        else spec.values.shape = {sh[0], 1, sh[1], sh[2]};
    } else if (sh.size() == 2) {
        spec.values.shape = {1, 1, sh[0], sh[1]};
    } else if (sh.size() != 4) {
        throw shape_error(view.stage, "not a Tq×Tk stage " + expected_got("rank 2, 3 or 4", shape_string(sh)));
    }
    const std::size_t B = spec.values.shape[0], H = spec.values.shape[1], Tq = spec.values.shape[2], Tk = spec.values.shape[3];

    const std::size_t n = spec.values.size();
    // The masked cells by the writers' one rule (masked_cells); a weight is drawn grey only
    // when it is 0 or NaN, so that a fully masked row under a finite fill keeps its colours.
    const bool is_weights = tensor_kind(view.stage) == stage_kind::weights;
    if (is_weights || tensor_kind(view.stage) == stage_kind::scores) {
        const std::vector<char> masked = masked_cells(doc, *t);
        spec.masked.assign(masked.begin(), masked.end());
        if (is_weights)
            for (std::size_t i = 0; i < n; ++i)
                if (spec.masked[i]) {
                    const double w = spec.values.value(i);
                    spec.masked[i] = w == 0 || std::isnan(w);
                }
    }

    // A checkpoint run over a batch of ids that differ labels each item in meta.model.tokens
    // (B lists of T labels) and leaves `tokens` empty: the drawn item's labels are those.
    std::vector<std::string> item_tokens;
    if (doc.tokens.empty() && has_meta && meta.contains("model") && meta["model"].is_object() &&
        meta["model"].contains("tokens") && meta["model"]["tokens"].is_array() && view.batch < meta["model"]["tokens"].size()) {
        const auto& labels = meta["model"]["tokens"][view.batch];
        if (labels.is_array() && labels.size() == Tq && std::all_of(labels.begin(), labels.end(), [](const auto& l) { return l.is_string(); }))
            for (const auto& l : labels) item_tokens.push_back(l.template get<std::string>());
    }
    const std::vector<std::string>& tokens = doc.tokens.empty() ? item_tokens : doc.tokens;
    if (!tokens.empty()) {
        if (tokens.size() != Tq)
            throw_token_count(view, "--tokens", "one token per query " + expected_got(std::to_string(Tq), std::to_string(tokens.size())));
        spec.row_labels = tokens;
        const std::size_t past = has_meta && meta.contains("past_length") && meta["past_length"].is_number_unsigned()
                                     ? meta["past_length"].get<std::size_t>()
                                     : 0;
        if (Tk == past + Tq && doc.tokens_kv.empty()) {
            for (std::size_t j = 0; j < past; ++j) spec.col_labels.push_back(std::to_string(j));
            spec.col_labels.insert(spec.col_labels.end(), tokens.begin(), tokens.end());
        }
    }
    if (!doc.tokens_kv.empty()) {
        if (doc.tokens_kv.size() != Tk)
            throw_token_count(view, "--tokens-kv", "one token per key " + expected_got(std::to_string(Tk), std::to_string(doc.tokens_kv.size())));
        spec.col_labels = doc.tokens_kv;
    }

    spec.batch = view.batch;
    spec.head = view.head;
    spec.grid = view.grid;
    if (view.batch >= B) throw usage_error("--batch", "out of range " + expected_got(range_text(B), std::to_string(view.batch)));
    if (!view.grid && view.head >= H) throw usage_error("--head", "out of range " + expected_got(range_text(H), std::to_string(view.head)));

    std::string where = "batch " + std::to_string(view.batch) + ", ";
    if (averaged && H == 1) where += "heads averaged";
    else if (view.grid && H > 1) where += "heads 0–" + std::to_string(H - 1);
    else where += "head " + std::to_string(view.head);
    spec.title = view.stage + model_text(meta) + settings_text(meta) + " · " + where;
    spec.colorbar_label = view.stage;
    if (is_weights) {
        spec.vmin = 0.0;
        spec.vmax = 1.0;
    }
    return spec;
}

heatmap_spec heatmap_from_array(const array& values, const std::string& name, const heatmap_view& view,
                                const std::vector<std::string>& tokens) {
    heatmap_spec spec;
    spec.values = values;
    const shape_t sh = values.shape;
    if (sh.size() == 2) spec.values.shape = {1, 1, sh[0], sh[1]};
    else if (sh.size() == 3) spec.values.shape = {sh[0], 1, sh[1], sh[2]};
    else if (sh.size() != 4)
        throw shape_error(name, "not a matrix to draw " + expected_got("rank 2, 3 or 4", shape_string(sh)));
    const std::size_t B = spec.values.shape[0], H = spec.values.shape[1], rows = spec.values.shape[2], cols = spec.values.shape[3];
    if (!tokens.empty()) {
        if (tokens.size() != rows)
            throw_token_count(view, "--tokens", "one token per row " + expected_got(std::to_string(rows), std::to_string(tokens.size())));
        spec.row_labels = tokens;
        if (cols == rows) spec.col_labels = tokens;
    }
    if (view.batch >= B) throw usage_error("--batch", "out of range " + expected_got(range_text(B), std::to_string(view.batch)));
    if (!view.grid && view.head >= H) throw usage_error("--head", "out of range " + expected_got(range_text(H), std::to_string(view.head)));
    spec.batch = view.batch;
    spec.head = view.head;
    spec.grid = view.grid;
    std::string where = "batch " + std::to_string(view.batch) + ", ";
    if (view.grid && H > 1) where += "heads 0–" + std::to_string(H - 1);
    else where += "head " + std::to_string(view.head);
    spec.title = name + " · " + where;
    spec.colorbar_label = name;
    spec.row_caption = "rows";
    spec.col_caption = "columns";
    return spec;
}

heatmap_layout write_heatmap(const std::string& path, const heatmap_spec& spec) {
    const image_format f = image_format_from_path(path);
    // Batch workers draw side by side: one figure at a time (cairo_mutex).
    const std::lock_guard<std::mutex> lock(cairo_mutex());
    const plan p = make_plan(spec);
    const heatmap_layout& l = p.layout;
    const double page_w = l.width / p.k, page_h = l.height / p.k;  // points, for SVG and PDF

    atomic_file file(path);
    std::ostream& out = file.stream();
    surface_ptr surface;
    switch (f) {
        case image_format::png: surface.reset(cairo_image_surface_create(CAIRO_FORMAT_RGB24, l.width, l.height)); break;
        case image_format::svg:
            surface.reset(cairo_svg_surface_create_for_stream(write_to_stream, &out, page_w, page_h));
            break;
        case image_format::pdf:
            surface.reset(cairo_pdf_surface_create_for_stream(write_to_stream, &out, page_w, page_h));
            cairo_pdf_surface_set_metadata(surface.get(), CAIRO_PDF_METADATA_TITLE, valid_utf8(spec.title).c_str());
            cairo_pdf_surface_set_metadata(surface.get(), CAIRO_PDF_METADATA_CREATOR, "attn " ATTN_VERSION);
            break;
    }
    check(cairo_surface_status(surface.get()), path);
    {
        context_ptr cr(cairo_create(surface.get()));
        if (f != image_format::png) cairo_scale(cr.get(), 1 / p.k, 1 / p.k);  // the layout is in pixels
        draw(cr.get(), spec, p);
        check(cairo_status(cr.get()), path);
    }
    if (f == image_format::png) check(cairo_surface_write_to_png_stream(surface.get(), write_to_stream, &out), path);
    cairo_surface_finish(surface.get());
    check(cairo_surface_status(surface.get()), path);
    file.commit();
    return l;
}

}  // namespace attn::io
