// Heatmaps through cairo: one layout (layout.cpp) drawn on the PNG, SVG and PDF surfaces.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <ostream>

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>

#include "attn/error.hpp"
#include "attn/text.hpp"
#include "attn/io/output.hpp"
#include "plan.hpp"

namespace attn::io {

using namespace plot_detail;

namespace plot_detail {

std::mutex& cairo_mutex() {
    static std::mutex m;
    return m;
}

void set_font(cairo_t* cr, double size, bool bold) {
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

}  // namespace plot_detail

namespace {

constexpr rgb8 viridis17[17] = {{68, 1, 84},    {72, 24, 106},   {71, 45, 123},  {66, 64, 134},  {59, 82, 139},
                                {51, 99, 141},  {44, 114, 142},  {38, 130, 142}, {33, 145, 140}, {31, 160, 136},
                                {40, 174, 128}, {63, 188, 115},  {94, 201, 98},  {132, 212, 75}, {173, 220, 48},
                                {216, 226, 25}, {253, 231, 37}};

// Rasterised matrices above this many cells per panel: SVG/PDF rectangles would be huge.
constexpr std::size_t max_vector_cells = 128 * 128;

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
