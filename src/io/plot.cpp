// Heatmaps through cairo: one layout shared by the PNG, SVG and PDF surfaces.
#include "attn/io/plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <ostream>

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>

#include "attn/error.hpp"
#include "attn/text.hpp"
#include "attn/io/output.hpp"

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

double text_width(cairo_t* cr, const std::string& s) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, s.c_str(), &e);
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
        throw value_error("--batch", "out of range " + expected_got(range_text(d.B), std::to_string(s.batch)));
    if (!s.grid && s.head >= d.H)
        throw value_error("--head", "out of range " + expected_got(range_text(d.H), std::to_string(s.head)));
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

/// The layout plus what drawing needs beyond it.
struct plan {
    heatmap_layout layout;
    dims d;
    std::vector<std::size_t> heads;
    double vmin = 0, vmax = 1;
    bool any_masked = false;
    bool grid_panels = false;
    int row_step = 1, col_step = 1;
    bool col_horizontal = true;
    int row_label_w = 0, col_label_h = 0;
    int panel_title_h = 0;
    double ascent = 0, descent = 0, title_ascent = 0;
    int matrix_dx = 0, matrix_dy = 0;  // matrix corner within its panel
    std::vector<double> ticks;
    double tick_step = 1;
};

plan make_plan(const heatmap_spec& s) {
    plan p;
    p.d = check_spec(s);
    const dims& d = p.d;
    p.heads = heads_drawn(s, d);
    p.grid_panels = p.heads.size() > 1;

    // Colour range over the panels drawn.
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (std::size_t h : p.heads) {
        const std::size_t base = offset_of(d, s.batch, h);
        for (std::size_t i = base; i < base + d.Tq * d.Tk; ++i) {
            const double v = s.values.value(i);
            if (cell_masked(s, i, v)) {
                p.any_masked = true;
                continue;
            }
            if (!std::isfinite(v)) continue;
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
    }
    for (const auto& [name, v] : {std::pair{"--vmin", s.vmin}, std::pair{"--vmax", s.vmax}})
        if (v && !std::isfinite(*v))
            throw usage_error(name, "not a finite number " + expected_got("a finite number", number_text(*v)));
    if (s.vmin && s.vmax && !(*s.vmin < *s.vmax))
        throw usage_error("--vmin", "not below --vmax " + expected_got("vmin < vmax", number_text(*s.vmin) + " and " + number_text(*s.vmax)));
    if (lo > hi) lo = 0, hi = 1;  // nothing finite to show
    p.vmin = s.vmin.value_or(s.vmax ? std::min(lo, *s.vmax - 1) : lo);
    p.vmax = s.vmax.value_or(std::max(hi, p.vmin + (s.vmin ? 1 : 0)));
    if (!(p.vmax > p.vmin)) {
        // One value: widen around it, by a step its magnitude can hold.
        const double pad = std::max(0.5, std::abs(p.vmin) * 1e-3);
        p.vmin -= pad;
        p.vmax += pad;
    }
    p.ticks = nice_ticks(p.vmin, p.vmax, p.tick_step);

    // Text metrics from a scratch surface.
    surface_ptr scratch(cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1));
    context_ptr ctx(cairo_create(scratch.get()));
    cairo_t* cr = ctx.get();
    set_font(cr, plot_units::title_size, true);
    cairo_font_extents_t fe;
    cairo_font_extents(cr, &fe);
    p.title_ascent = fe.ascent;
    const double title_h = fe.ascent + fe.descent;
    const int title_w = s.title.empty() ? 0 : static_cast<int>(std::ceil(text_width(cr, s.title)));
    set_font(cr, plot_units::font_size);
    cairo_font_extents(cr, &fe);
    p.ascent = fe.ascent;
    p.descent = fe.descent;
    const int fh = static_cast<int>(std::ceil(fe.ascent + fe.descent));

    const int target = p.grid_panels ? plot_units::grid_target : plot_units::single_target;
    const int cell = std::clamp(static_cast<int>(target / std::max(d.Tq, d.Tk)), 1, plot_units::max_cell);
    p.row_step = (fh + 2 + cell - 1) / cell;
    double row_w = 0;
    for (std::size_t i = 0; i < d.Tq; i += p.row_step) row_w = std::max(row_w, text_width(cr, label(s.row_labels, i)));
    p.row_label_w = static_cast<int>(std::ceil(row_w));
    double col_w = 0;
    for (std::size_t j = 0; j < d.Tk; ++j) col_w = std::max(col_w, text_width(cr, label(s.col_labels, j)));
    p.col_horizontal = col_w + 6 <= cell;
    if (p.col_horizontal) {
        p.col_step = 1;
        p.col_label_h = fh;
    } else {
        p.col_step = (fh + 2 + cell - 1) / cell;
        col_w = 0;
        for (std::size_t j = 0; j < d.Tk; j += p.col_step) col_w = std::max(col_w, text_width(cr, label(s.col_labels, j)));
        p.col_label_h = static_cast<int>(std::ceil(col_w));
    }
    p.panel_title_h = p.grid_panels ? fh + 6 : 0;

    // One panel: caption "queries" | row labels | matrix, under title / "keys" / column labels.
    const int caption_w = fh + 4;
    p.matrix_dx = caption_w + p.row_label_w + label_pad;
    p.matrix_dy = p.panel_title_h + fh + 4 + p.col_label_h + label_pad;
    const int matrix_w = static_cast<int>(d.Tk) * cell, matrix_h = static_cast<int>(d.Tq) * cell;
    const int panel_w = p.matrix_dx + matrix_w, panel_h = p.matrix_dy + matrix_h;

    const std::size_t n = p.heads.size();
    const std::size_t ncols = p.grid_panels ? static_cast<std::size_t>(std::ceil(std::sqrt(static_cast<double>(n)))) : 1;
    const std::size_t nrows = (n + ncols - 1) / ncols;
    const int top = plot_units::margin + (s.title.empty() ? 0 : static_cast<int>(std::ceil(title_h)) + 10);

    heatmap_layout& l = p.layout;
    l.cell = cell;
    l.rows = d.Tq;
    l.cols = d.Tk;
    for (std::size_t k = 0; k < n; ++k) {
        const int c = static_cast<int>(k % ncols), r = static_cast<int>(k / ncols);
        l.panels.push_back({p.heads[k], plot_units::margin + c * (panel_w + plot_units::panel_gap) + p.matrix_dx,
                            top + r * (panel_h + plot_units::panel_gap) + p.matrix_dy});
    }
    const int panels_right = plot_units::margin + static_cast<int>(ncols) * panel_w + static_cast<int>(ncols - 1) * plot_units::panel_gap;
    const int panels_bottom = top + static_cast<int>(nrows) * panel_h + static_cast<int>(nrows - 1) * plot_units::panel_gap;

    l.colorbar_x = panels_right + colorbar_gap;
    l.colorbar_y = l.panels.front().y;
    const int last_matrix_bottom = l.panels.back().y + matrix_h;
    l.colorbar_height = std::max(last_matrix_bottom - l.colorbar_y, plot_units::colorbar_min_height);
    const int cb_bottom = l.colorbar_y + l.colorbar_height;

    double tick_w = 0;
    for (double t : p.ticks) tick_w = std::max(tick_w, text_width(cr, tick_text(t, p.tick_step)));
    int right = l.colorbar_x + plot_units::colorbar_width + tick_length + 3 + static_cast<int>(std::ceil(tick_w));
    right = std::max(right, l.colorbar_x + static_cast<int>(std::ceil(text_width(cr, s.colorbar_label))));
    int bottom = std::max(panels_bottom, cb_bottom + static_cast<int>(std::ceil(p.descent)) + 2);
    if (p.any_masked) {
        right = std::max(right, l.colorbar_x + swatch + 6 + static_cast<int>(std::ceil(text_width(cr, "masked"))));
        bottom = std::max(bottom, cb_bottom + 14 + swatch);
    }
    l.width = std::max(right + plot_units::margin, title_w + 2 * plot_units::margin);
    l.height = bottom + plot_units::margin;
    return p;
}

void show_text_at(cairo_t* cr, double x, double y, const std::string& s) {
    cairo_move_to(cr, x, y);
    cairo_show_text(cr, s.c_str());
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
    if (cell_masked(s, i, v)) return masked_color;
    return colormap((v - p.vmin) / (p.vmax - p.vmin));
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
    if (cell < plot_units::hatch_min_cell) return;
    // "/" strokes x + y = (2m+1)·cell/(2n) in cell coordinates, n about one per 12 units:
    // they join into continuous diagonals across masked regions, and none passes through
    // the centre (x + y = cell would need 2n = 2m+1).
    set_color(cr, hatch_color);
    cairo_set_line_width(cr, 1.0);
    const int n = std::max(1, static_cast<int>(std::lround(cell / 12.0)));
    bool any = false;
    for (std::size_t i = 0; i < d.Tq; ++i)
        for (std::size_t j = 0; j < d.Tk; ++j) {
            const std::size_t k = base + i * d.Tk + j;
            if (!cell_masked(s, k, s.values.value(k))) continue;
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

void draw_hatched_swatch(cairo_t* cr, double x, double y, double size) {
    set_color(cr, masked_color);
    cairo_rectangle(cr, x, y, size, size);
    cairo_fill(cr);
    cairo_save(cr);
    cairo_rectangle(cr, x, y, size, size);
    cairo_clip(cr);
    set_color(cr, hatch_color);
    cairo_set_line_width(cr, 1.0);
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
        set_font(cr, plot_units::title_size, true);
        set_color(cr, text_color);
        show_text_at(cr, (l.width - text_width(cr, s.title)) / 2, plot_units::margin + p.title_ascent, s.title);
    }

    const double baseline_mid = (p.ascent - p.descent) / 2;  // from a row's centre to its baseline
    const int matrix_w = static_cast<int>(d.Tk) * l.cell, matrix_h = static_cast<int>(d.Tq) * l.cell;
    for (const auto& panel : l.panels) {
        draw_cells(cr, s, p, panel);
        const double px = panel.x - p.matrix_dx, py = panel.y - p.matrix_dy;  // panel corner
        const double mid_x = panel.x + matrix_w / 2.0;
        if (p.grid_panels) {
            set_font(cr, plot_units::font_size, true);
            set_color(cr, text_color);
            const std::string t = "head " + std::to_string(panel.head);
            show_text_at(cr, mid_x - text_width(cr, t) / 2, py + p.ascent, t);
        }
        set_font(cr, plot_units::font_size);
        set_color(cr, caption_color);
        show_text_at(cr, mid_x - text_width(cr, "keys") / 2, py + p.panel_title_h + p.ascent, "keys");
        show_text_up(cr, px + (p.ascent + p.descent) / 2, panel.y + matrix_h / 2.0 + text_width(cr, "queries") / 2,
                     "queries", p);

        set_color(cr, text_color);
        for (std::size_t i = 0; i < d.Tq; i += p.row_step) {
            const std::string t = label(s.row_labels, i);
            const double cy = panel.y + (static_cast<double>(i) + 0.5) * l.cell;
            show_text_at(cr, panel.x - label_pad - text_width(cr, t), cy + baseline_mid, t);
        }
        for (std::size_t j = 0; j < d.Tk; j += p.col_step) {
            const std::string t = label(s.col_labels, j);
            const double cx = panel.x + (static_cast<double>(j) + 0.5) * l.cell;
            if (p.col_horizontal)
                show_text_at(cr, cx - text_width(cr, t) / 2, panel.y - label_pad - p.descent, t);
            else
                show_text_up(cr, cx, panel.y - label_pad, t, p);
        }
    }

    // Colour bar: the map's 17 samples as gradient stops reproduce colormap() exactly.
    const double cbx = l.colorbar_x, cby = l.colorbar_y, cbw = plot_units::colorbar_width, cbh = l.colorbar_height;
    cairo_pattern_t* grad = cairo_pattern_create_linear(0, cby + cbh, 0, cby);
    for (int k = 0; k < 17; ++k)
        cairo_pattern_add_color_stop_rgb(grad, k / 16.0, viridis17[k].r / 255.0, viridis17[k].g / 255.0, viridis17[k].b / 255.0);
    cairo_rectangle(cr, cbx, cby, cbw, cbh);
    cairo_set_source(cr, grad);
    cairo_fill(cr);
    cairo_pattern_destroy(grad);
    set_color(cr, caption_color);
    cairo_set_line_width(cr, 1.0);
    cairo_rectangle(cr, cbx + 0.5, cby + 0.5, cbw - 1, cbh - 1);
    cairo_stroke(cr);

    set_font(cr, plot_units::font_size);
    set_color(cr, text_color);
    if (!s.colorbar_label.empty()) show_text_at(cr, cbx, cby - label_pad - p.descent, s.colorbar_label);
    for (double t : p.ticks) {
        const double y = std::round(cby + cbh - (t - p.vmin) / (p.vmax - p.vmin) * cbh) + 0.5;
        set_color(cr, text_color);
        cairo_move_to(cr, cbx + cbw, y);
        cairo_line_to(cr, cbx + cbw + tick_length, y);
        cairo_stroke(cr);
        show_text_at(cr, cbx + cbw + tick_length + 3, y + baseline_mid, tick_text(t, p.tick_step));
    }
    if (p.any_masked) {
        const double y = cby + cbh + 14;
        draw_hatched_swatch(cr, cbx, y, swatch);
        set_color(cr, text_color);
        show_text_at(cr, cbx + swatch + 6, y + swatch / 2.0 + baseline_mid, "masked");
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

heatmap_layout layout_heatmap(const heatmap_spec& spec) { return make_plan(spec).layout; }

namespace {

constexpr const char* matrix_stages[] = {"qk", "scaled", "scores", "weights"};

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

}  // namespace

heatmap_spec heatmap_from_document(const document& doc, const heatmap_view& view) {
    const nlohmann::ordered_json& meta = doc.meta;
    const bool has_meta = meta.is_object();
    const named_array* t = find_tensor(doc, view.stage);
    if (!t || std::find(std::begin(matrix_stages), std::end(matrix_stages), view.stage) == std::end(matrix_stages)) {
        std::vector<std::string> present;
        for (const char* m : matrix_stages)
            if (find_tensor(doc, m)) present.push_back(m);
        throw value_error("--stage", "not in the input " +
                                         expected_got(present.empty() ? "a qk, scaled, scores or weights tensor" : or_list(present),
                                                      view.stage));
    }

    heatmap_spec spec;
    spec.values = t->value;
    const shape_t sh = t->value.shape;
    const std::size_t heads_meta = has_meta && meta.contains("heads") && meta["heads"].is_number_unsigned() ? meta["heads"].get<std::size_t>() : 1;
    const bool averaged = has_meta && meta.value("average_heads", false);
    if (sh.size() == 3) {
        if (heads_meta > 1 && !averaged) spec.values.shape = {1, sh[0], sh[1], sh[2]};
        else spec.values.shape = {sh[0], 1, sh[1], sh[2]};
    } else if (sh.size() == 2) {
        spec.values.shape = {1, 1, sh[0], sh[1]};
    } else if (sh.size() != 4) {
        throw shape_error(view.stage, "not a Tq×Tk stage " + expected_got("rank 2, 3 or 4", shape_string(sh)));
    }
    const std::size_t B = spec.values.shape[0], H = spec.values.shape[1], Tq = spec.values.shape[2], Tk = spec.values.shape[3];

    const std::size_t n = spec.values.size();
    const bool is_weights = view.stage == "weights";
    if (is_weights || view.stage == "scores") {
        const named_array* scores = find_tensor(doc, "scores");
        if (scores && scores->value.shape == sh) {
            std::optional<double> fill;
            if (has_meta && meta.contains("mask_fill") && meta["mask_fill"].is_number()) fill = meta["mask_fill"].get<double>();
            spec.masked.assign(n, 0);
            for (std::size_t i = 0; i < n; ++i) {
                const double sc = scores->value.value(i);
                bool m = sc == -std::numeric_limits<double>::infinity() || (fill && sc == *fill);
                if (m && is_weights) {
                    const double w = spec.values.value(i);
                    m = w == 0 || std::isnan(w);
                }
                spec.masked[i] = m;
            }
        } else if (is_weights) {
            spec.masked.assign(n, 0);
            for (std::size_t i = 0; i < n; ++i) spec.masked[i] = spec.values.value(i) == 0;
        }
    }

    if (!doc.tokens.empty()) {
        if (doc.tokens.size() != Tq)
            throw value_error("--tokens", "one token per query " + expected_got(std::to_string(Tq), std::to_string(doc.tokens.size())));
        spec.row_labels = doc.tokens;
        const std::size_t past = has_meta && meta.contains("past_length") && meta["past_length"].is_number_unsigned()
                                     ? meta["past_length"].get<std::size_t>()
                                     : 0;
        if (Tk == past + Tq) {
            for (std::size_t j = 0; j < past; ++j) spec.col_labels.push_back(std::to_string(j));
            spec.col_labels.insert(spec.col_labels.end(), doc.tokens.begin(), doc.tokens.end());
        }
    }

    spec.batch = view.batch;
    spec.head = view.head;
    spec.grid = view.grid;
    if (view.batch >= B) throw value_error("--batch", "out of range " + expected_got(range_text(B), std::to_string(view.batch)));
    if (!view.grid && view.head >= H) throw value_error("--head", "out of range " + expected_got(range_text(H), std::to_string(view.head)));

    std::string where = "batch " + std::to_string(view.batch) + ", ";
    if (averaged && H == 1) where += "heads averaged";
    else if (view.grid && H > 1) where += "heads 0–" + std::to_string(H - 1);
    else where += "head " + std::to_string(view.head);
    spec.title = view.stage + settings_text(meta) + " · " + where;
    spec.colorbar_label = view.stage;
    if (is_weights) {
        spec.vmin = 0.0;
        spec.vmax = 1.0;
    }
    return spec;
}

void write_heatmap(const std::string& path, const heatmap_spec& spec) {
    const image_format f = image_format_from_path(path);
    const plan p = make_plan(spec);
    const heatmap_layout& l = p.layout;

    atomic_file file(path);
    std::ostream& out = file.stream();
    surface_ptr surface;
    switch (f) {
        case image_format::png: surface.reset(cairo_image_surface_create(CAIRO_FORMAT_RGB24, l.width, l.height)); break;
        case image_format::svg:
            surface.reset(cairo_svg_surface_create_for_stream(write_to_stream, &out, l.width, l.height));
            break;
        case image_format::pdf:
            surface.reset(cairo_pdf_surface_create_for_stream(write_to_stream, &out, l.width, l.height));
            cairo_pdf_surface_set_metadata(surface.get(), CAIRO_PDF_METADATA_TITLE, spec.title.c_str());
            cairo_pdf_surface_set_metadata(surface.get(), CAIRO_PDF_METADATA_CREATOR, "attn " ATTN_VERSION);
            break;
    }
    check(cairo_surface_status(surface.get()), path);
    {
        context_ptr cr(cairo_create(surface.get()));
        draw(cr.get(), spec, p);
        check(cairo_status(cr.get()), path);
    }
    if (f == image_format::png) check(cairo_surface_write_to_png_stream(surface.get(), write_to_stream, &out), path);
    cairo_surface_finish(surface.get());
    check(cairo_surface_status(surface.get()), path);
    file.commit();
}

}  // namespace attn::io
