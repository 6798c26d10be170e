// The heatmap's layout: the spec checked, the colour range and ticks, text measured and
// everything placed (plan.hpp), before any drawing.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>

#include <cairo.h>
#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/text.hpp"
#include "plan.hpp"

namespace attn::io {

using namespace plot_detail;

namespace plot_detail {

std::string number_text(double v) { return general_number(v, 4); }

std::string range_text(std::size_t n) { return n <= 1 ? "0" : "0 to " + std::to_string(n - 1); }

std::size_t offset_of(const dims& d, std::size_t b, std::size_t h) { return ((b * d.H) + h) * d.Tq * d.Tk; }

bool cell_masked(const heatmap_spec& s, std::size_t i, double v) {
    return std::isnan(v) || v == -std::numeric_limits<double>::infinity() || (!s.masked.empty() && s.masked[i]);
}

std::string label(const std::vector<std::string>& labels, std::size_t i) {
    return labels.empty() ? std::to_string(i) : labels[i];
}

std::string annotation_text(double v, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    std::string s = buf;
    if (s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
    return s;
}

double row_label_center(const plan& p, const heatmap_layout::panel& panel, std::size_t i, int cell) {
    return std::max(panel.y + (static_cast<double>(i) + 0.5) * cell, panel.y - p.u(label_pad) + (p.ascent + p.descent) / 2);
}

bool drawn_masked(const heatmap_spec& s, const plan& p, std::size_t i, double v) {
    return cell_masked(s, i, v) || (p.log && !(v > 0));
}

}  // namespace plot_detail

namespace {

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


/// The colour range over the panels drawn (p.vmin, p.vmax on the colour scale), its ticks
/// and legend, and in raw_lo / raw_hi the range of the finite values drawn, for the
/// annotations' width. Throws usage_error for a bad --vmin / --vmax.
void colour_range(const heatmap_spec& s, plan& p, double& raw_lo, double& raw_hi) {
    const dims& d = p.d;
    for (const auto& [name, v] : {std::pair{"--vmin", s.vmin}, std::pair{"--vmax", s.vmax}}) {
        if (v && !std::isfinite(*v))
            throw usage_error(name, "not a finite number " + expected_got("a finite number", number_text(*v)));
        if (v && s.log && !(*v > 0))
            throw usage_error(name, "not positive, which --log needs " + expected_got("a number > 0", number_text(*v)));
    }
    if (s.vmin && s.vmax && !(*s.vmin < *s.vmax))
        throw usage_error("--vmin", "not below --vmax " + expected_got("vmin < vmax", number_text(*s.vmin) + " and " + number_text(*s.vmax)));
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    raw_lo = lo, raw_hi = hi;  // of the finite values drawn, for the annotations' width
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
}

/// The cell size and the image size: the natural ones without s.size, else the largest
/// cells with which `arrange` fits everything in s.size (the colour bar gives up its
/// minimum height first), centred. Throws value_error when even 1-px cells do not fit.
template <class Arrange>
void fit_size(const heatmap_spec& s, plan& p, const Arrange& arrange, double title_w, std::size_t ncols, std::size_t nrows) {
    const dims& d = p.d;
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
}

/// Whether the numbers fit in the cells (s.annotate): the cell side the widest needs, from
/// `cr` in the labels' font.
void fit_annotations(cairo_t* cr, const heatmap_spec& s, plan& p, double raw_lo, double raw_hi, int fh) {
    heatmap_layout& l = p.layout;
    if (s.annotate) {
        // Digits share one advance width in DejaVu Sans: the widest number is at an end.
        double w = 0;
        if (raw_lo <= raw_hi)
            for (double v : {raw_lo, raw_hi}) w = std::max(w, text_width(cr, annotation_text(v, p.decimals)));
        l.annotation_cell = std::max(static_cast<int>(std::ceil(w)) + p.u(4), fh + p.u(2));
        l.annotated = l.cell >= l.annotation_cell;
    }
}

}  // namespace

namespace plot_detail {

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
    double raw_lo = 0, raw_hi = 0;
    colour_range(s, p, raw_lo, raw_hi);

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

    fit_size(s, p, arrange, title_w, ncols, nrows);

    fit_annotations(cr, s, p, raw_lo, raw_hi, fh);
    return p;
}

}  // namespace plot_detail

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

}  // namespace attn::io
