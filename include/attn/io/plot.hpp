#pragma once
/// \file plot.hpp
/// Heatmaps of Tq×Tk stages (qk, scaled, scores, weights) as PNG, SVG or PDF, drawn
/// with cairo: token labels on both axes, a colour bar, a title naming the settings,
/// and masked cells (score −∞) drawn grey and hatched so that they never look like
/// small weights. `attn plot` and `attn compute --plot` are thin wrappers around
/// heatmap_from_document + write_heatmap.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attn/io/document.hpp"
#include "attn/stages.hpp"
#include "attn/tensor.hpp"

namespace attn::io {

/// `s` with each ill-formed UTF-8 sequence replaced by U+FFFD (EF BF BD): the rule of
/// nlohmann::json's error_handler_t::replace, which the JSON and HTML writers dump
/// with, so a partial-UTF-8 GPT-2 byte label or a non-UTF-8 file name reads the same in
/// a plot, a page and a JSON document. Valid text comes back unchanged. Throws nothing
/// but std::bad_alloc.
std::string valid_utf8(const std::string& s);

/// An 8-bit sRGB colour, exactly as it lands in a PNG pixel.
struct rgb8 {
    std::uint8_t r = 0, g = 0, b = 0;
    friend bool operator==(rgb8 a, rgb8 b) { return a.r == b.r && a.g == b.g && a.b == b.b; }
    friend bool operator!=(rgb8 a, rgb8 b) { return !(a == b); }
};

/// The colour map: matplotlib's viridis (perceptually uniform, readable in grey and by
/// colour-blind readers), sampled at 17 of its 256 entries (0, 16, …, 240, 255) and
/// interpolated linearly per channel. t is clamped to [0, 1]: colormap(0) = (68, 1, 84)
/// dark purple is the minimum, colormap(1) = (253, 231, 37) yellow the maximum.
rgb8 colormap(double t);

/// Fill of a masked cell (score −∞, or NaN): a neutral grey, absent from viridis.
inline constexpr rgb8 masked_color{217, 217, 217};
/// The diagonal hatch lines drawn over masked cells of at least hatch_min_cell units.
/// They run through the middle of the cell edges, never through a cell's centre.
inline constexpr rgb8 hatch_color{150, 150, 150};
/// Background of the whole image.
inline constexpr rgb8 background_color{255, 255, 255};

/// Output formats, chosen by the file extension.
enum class image_format { png, svg, pdf };

/// The format of `path` from its extension (case-insensitive: .png, .svg, .pdf).
/// Throws usage_error with source "-o", e.g.
/// "-o: unknown image format (expected .png, .svg or .pdf, got .gif)".
image_format image_format_from_path(const std::string& path);

/// Layout constants, in points (1/72 inch): at the default 72 dpi one point is one pixel.
/// At another dpi every one of them (and every text size) is multiplied by dpi/72 and the
/// layout is made in pixels (heatmap_layout).
namespace plot_units {
inline constexpr int margin = 16;           ///< blank border around everything
inline constexpr int font_size = 13;        ///< labels, ticks, captions (DejaVu Sans)
inline constexpr int title_size = 15;       ///< the title line
inline constexpr int max_cell = 64;         ///< cells never get larger than this
inline constexpr int single_target = 448;   ///< aim for a matrix this wide (one panel)
inline constexpr int grid_target = 256;     ///< … and this wide per panel of a grid
inline constexpr int hatch_min_cell = 8;    ///< smaller masked cells are flat grey
inline constexpr int colorbar_width = 18;
inline constexpr int colorbar_min_height = 160;
inline constexpr int panel_gap = 28;        ///< between the panels of a grid
inline constexpr int label_gap = 2;         ///< least room between two tick labels
inline constexpr int max_side = 16384;      ///< largest --size per side, in pixels
inline constexpr double default_dpi = 72;   ///< one point is one pixel
inline constexpr double max_dpi = 1200;     ///< largest --dpi
inline constexpr int max_decimals = 10;     ///< largest number of --annotate decimals
}  // namespace plot_units

/// A figure size in whole pixels.
struct figure_size {
    int width = 0, height = 0;
    friend bool operator==(figure_size a, figure_size b) { return a.width == b.width && a.height == b.height; }
};

/// Which of `count` tick labels along an axis are drawn so that none overlaps the next:
/// every k-th, starting at 0, with k = max(1, ⌈extent / spacing⌉). `spacing` is the
/// distance between the centres of neighbouring cells and `extent` the room one label
/// needs along the axis, gap included (for labels side by side across the axis, as row
/// labels are, that is the font's height plus plot_units::label_gap), both in the same
/// unit (px or pt). Labels centred on their cells, drawn k·spacing ≥ extent apart, do not
/// overlap. Returns the indices, ascending. Throws value_error (source "plot") unless
/// spacing > 0 and extent ≥ 0 are finite.
std::vector<std::size_t> labels_drawn(std::size_t count, double spacing, double extent);

/// What to draw. values is rank 4 (B, H, Tq, Tk) or rank 2 (Tq, Tk) = (1, 1, Tq, Tk),
/// any float or integer dtype (reshape other ranks first: it is only a shape change).
struct heatmap_spec {
    array values;
    /// Empty, or one flag per element of `values` (C order): non-zero = masked cell,
    /// drawn masked_color + hatch and left out of the colour range. Cells whose value is
    /// −∞ or NaN are drawn masked whatever the flags say.
    std::vector<std::uint8_t> masked;
    std::size_t batch = 0;  ///< which batch item
    std::size_t head = 0;   ///< which head, unless grid
    bool grid = false;      ///< every head of `batch`, one panel each, one shared colour bar
    /// Labels of the query rows (Tq of them) and key columns (Tk); empty: 0, 1, 2, …
    std::vector<std::string> row_labels, col_labels;
    std::string title;                 ///< one line at the top; empty: none
    std::string colorbar_label;        ///< e.g. "weights", written above the colour bar
    std::string row_caption = "queries", col_caption = "keys";  ///< the axis captions
    /// Colour range; a missing end is the min / max of the finite, unmasked values of
    /// the panels drawn (weights: set 0 and 1), or 1 from the given end when the data
    /// lie all beyond it. An empty range is widened by ±0.5 (with
    /// `log`, by half a decade either way).
    std::optional<double> vmin, vmax;
    /// Colour by log10 of the values: cell colour colormap((log10 v − log10 vmin) /
    /// (log10 vmax − log10 vmin)); vmin / vmax must then be > 0, and a missing end comes
    /// from the positive values only. Values ≤ 0, which have no logarithm, are drawn like
    /// masked cells (masked_color, hatched), and the legend says "masked or ≤ 0".
    bool log = false;
    /// Write each unmasked cell's value in it ("%.*f" with annotate_decimals), in white on
    /// dark cells and dark grey on light ones; left out, for the whole plot, when the
    /// widest number does not fit in a cell (heatmap_layout::annotated says which).
    bool annotate = false;
    int annotate_decimals = 2;  ///< 0 to plot_units::max_decimals
    /// The whole image, in pixels: the matrix cells are made as large as fits (at least
    /// 1 px) and everything is centred. Unset: the natural size (cell size from
    /// single_target / grid_target, at most max_cell, times dpi/72).
    std::optional<figure_size> size;
    /// Pixels per inch: text, margins and cells are plot_units × dpi/72 pixels. An SVG or
    /// PDF is the same drawing on a page of width·72/dpi × height·72/dpi points.
    double dpi = plot_units::default_dpi;
};

/// Where everything goes, so that callers (and tests) can find a cell's pixels.
/// Panel p's cell (i, j) covers [x + j·cell, x + (j+1)·cell) × [y + i·cell, y + (i+1)·cell)
/// with (x, y) = (panels[p].x, panels[p].y); see cell_center. All in pixels of the PNG;
/// an SVG or PDF page is the same, scaled by 72/dpi into points (equal at 72 dpi).
struct heatmap_layout {
    int width = 0, height = 0;  ///< the image, in px
    double scale = 1;           ///< px per pt: dpi / 72
    int cell = 0;               ///< side of one cell
    std::size_t rows = 0, cols = 0;  ///< Tq, Tk
    struct panel {
        std::size_t head;  ///< which head this panel shows
        int x, y;          ///< top-left corner of its cell (0, 0)
    };
    std::vector<panel> panels;  ///< one, or one per head (grid), row-major
    int colorbar_x = 0, colorbar_y = 0, colorbar_height = 0;
    int colorbar_width = plot_units::colorbar_width;  ///< plot_units::colorbar_width × scale
    /// A tick label drawn beside the matrix: which row / column, and the box its text
    /// occupies (advance width × font height; rotated column labels are tall boxes).
    struct label_box {
        std::size_t index;
        double x, y, w, h;
    };
    /// The row and column labels drawn, of every panel (labels_drawn thins them).
    std::vector<label_box> row_labels, col_labels;
    bool annotated = false;  ///< spec.annotate and the numbers fit in the cells
    /// With spec.annotate: the cell side the widest number needs (px).
    int annotation_cell = 0;
};

/// The layout write_heatmap uses for `spec`, in pixels. Without spec.size the cell size
/// is clamp(target·k / max(Tq, Tk), 1, max_cell·k), k = dpi/72, target = single_target or
/// grid_target; with it, the largest whole number of pixels with which everything fits
/// in spec.size (the colour bar gives up its minimum height first). A grid has ⌈√H⌉
/// panels per row. Text sizes come from the DejaVu Sans metrics (hinting off, so PNG,
/// SVG and PDF share one layout). Tick labels are thinned with labels_drawn.
/// Throws shape_error for a rank other than 2 or 4, an empty matrix, masked flags or
/// labels of the wrong length; usage_error (exit 2) for spec.batch / spec.head out of range
/// (source "--batch" / "--head", e.g. "--head: out of range (expected 0 to 1, got 5)")
/// and for a spec.size too small for 1-px cells ("--size: too small for this matrix
/// (expected at least 120x90, got 100x80)"); usage_error for a bad size, dpi, decimals,
/// vmin ≥ vmax, non-finite vmin / vmax, or vmin / vmax ≤ 0 with log.
heatmap_layout layout_heatmap(const heatmap_spec& spec);

/// Centre of cell (row, col) of panel `panel`, in image units (cell sizes are whole
/// numbers, so with an odd cell size this is the centre pixel, otherwise the pixel just
/// below-right of the centre).
inline std::pair<int, int> cell_center(const heatmap_layout& l, std::size_t panel, std::size_t row, std::size_t col) {
    return {l.panels[panel].x + static_cast<int>(col) * l.cell + l.cell / 2,
            l.panels[panel].y + static_cast<int>(row) * l.cell + l.cell / 2};
}

/// Draws the heatmap of `spec` and writes it atomically to `path` (temporary file beside
/// it, then rename; see atomic_file) as PNG, SVG or PDF by the extension. Returns the
/// layout drawn (layout_heatmap(spec)), e.g. to tell whether annotations fitted.
/// Throws usage_error for an unknown extension (before anything is written), the errors
/// of layout_heatmap, and io_error (source `path`) when the file cannot be written or
/// cairo fails.
heatmap_layout write_heatmap(const std::string& path, const heatmap_spec& spec);

/// Which stage of a document to plot, and which part of it.
struct heatmap_view {
    std::string stage = stage_of_kind(stage_kind::weights);  ///< qk, scaled, scores or weights (plot_stages)
    std::size_t batch = 0, head = 0;
    bool grid = false;
    /// The document's tokens came from --tokens / --tokens-kv: a count that does not fit
    /// Tq / Tk is a usage_error (exit 2), as in compute, rather than a value_error.
    bool tokens_from_options = false;
};

/// Builds the spec for one Tq×Tk stage of a document (what `attn compute` returns or
/// writes; meta may be empty, as for an .npz):
/// - shape: rank 4 is (B, H, Tq, Tk), rank 2 (Tq, Tk); rank 3 is (H, Tq, Tk) when meta
///   says heads > 1 without average_heads (a rank-2 input split into heads), else
///   (B, Tq, Tk);
/// - masked cells: the writers' one rule, masked_cells (writers.hpp: the mask stage, else
///   −∞ or meta.mask_fill scores, else exact zeros); for weights, only those that are
///   also exactly 0 or NaN (so an average over heads is not hidden);
/// - labels: the document's tokens label the rows; the columns too when Tk = past
///   length + Tq (past keys get their index), otherwise indices;
/// - colour range 0..1 for weights, else from the data; title "stage · mask: … · scale:
///   … · batch b, head h" from meta.
/// Throws value_error ("--stage" not in the document, token count ≠ Tq), usage_error
/// ("--batch"/"--head" out of range; a token count ≠ Tq when view.tokens_from_options)
/// and shape_error (stage not Tq×Tk shaped).
heatmap_spec heatmap_from_document(const document& doc, const heatmap_view& view);

/// Builds the spec for one array drawn as it is, not as an attention input (a lone
/// .npy such as attn's own weights output, or posenc's "pe"): rank 2 is (rows, cols),
/// rank 3 (B, rows, cols) and rank 4 (B, H, rows, cols), with view's batch / head / grid
/// (view.stage is not used). `name` heads the title ("name · batch 0, head 0") and the
/// colour bar; the axes are captioned "rows" and "columns". The colour range is the data's; −∞ and NaN cells are drawn masked.
/// `tokens`, if any, label the rows, and the columns too when the matrix is square.
/// Throws shape_error (source `name`) for rank 0, 1 or above 4, usage_error for
/// "--batch" / "--head" out of range, value_error for a token count ≠ rows ("--tokens";
/// usage_error when view.tokens_from_options).
heatmap_spec heatmap_from_array(const array& values, const std::string& name, const heatmap_view& view,
                                const std::vector<std::string>& tokens);

}  // namespace attn::io
