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
#include "attn/tensor.hpp"

namespace attn::io {

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

/// Layout constants, in pixels (PNG) or points (SVG, PDF): one unit either way.
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
}  // namespace plot_units

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
    /// Colour range; a missing end is the min / max of the finite, unmasked values of
    /// the panels drawn (weights: set 0 and 1). An empty range is widened by ±0.5.
    std::optional<double> vmin, vmax;
};

/// Where everything goes, so that callers (and tests) can find a cell's pixels.
/// Panel p's cell (i, j) covers [x + j·cell, x + (j+1)·cell) × [y + i·cell, y + (i+1)·cell)
/// with (x, y) = (panels[p].x, panels[p].y); see cell_center.
struct heatmap_layout {
    int width = 0, height = 0;  ///< the image, in px (PNG) or pt (SVG, PDF)
    int cell = 0;               ///< side of one cell
    std::size_t rows = 0, cols = 0;  ///< Tq, Tk
    struct panel {
        std::size_t head;  ///< which head this panel shows
        int x, y;          ///< top-left corner of its cell (0, 0)
    };
    std::vector<panel> panels;  ///< one, or one per head (grid), row-major
    int colorbar_x = 0, colorbar_y = 0, colorbar_height = 0;  ///< width is colorbar_width
};

/// The layout write_heatmap uses for `spec`. The cell size is
/// clamp(target / max(Tq, Tk), 1, max_cell), target = single_target or grid_target; a
/// grid has ⌈√H⌉ panels per row. Text sizes come from the DejaVu Sans metrics (hinting
/// off, so PNG, SVG and PDF share one layout).
/// Throws shape_error for a rank other than 2 or 4, an empty matrix, masked flags or
/// labels of the wrong length, and value_error for spec.batch / spec.head out of range
/// (source "--batch" / "--head", e.g. "--head: out of range (expected 0 to 1, got 5)").
heatmap_layout layout_heatmap(const heatmap_spec& spec);

/// Centre of cell (row, col) of panel `panel`, in image units (cell sizes are whole
/// numbers, so with an odd cell size this is the centre pixel, otherwise the pixel just
/// below-right of the centre).
inline std::pair<int, int> cell_center(const heatmap_layout& l, std::size_t panel, std::size_t row, std::size_t col) {
    return {l.panels[panel].x + static_cast<int>(col) * l.cell + l.cell / 2,
            l.panels[panel].y + static_cast<int>(row) * l.cell + l.cell / 2};
}

/// Draws the heatmap of `spec` and writes it atomically to `path` (temporary file beside
/// it, then rename; see atomic_file) as PNG, SVG or PDF by the extension.
/// Throws usage_error for an unknown extension (before anything is written), the errors
/// of layout_heatmap, and io_error (source `path`) when the file cannot be written or
/// cairo fails.
void write_heatmap(const std::string& path, const heatmap_spec& spec);

/// Which stage of a document to plot, and which part of it.
struct heatmap_view {
    std::string stage = "weights";  ///< qk, scaled, scores or weights
    std::size_t batch = 0, head = 0;
    bool grid = false;
};

/// Builds the spec for one Tq×Tk stage of a document (what `attn compute` returns or
/// writes; meta may be empty, as for an .npz):
/// - shape: rank 4 is (B, H, Tq, Tk), rank 2 (Tq, Tk); rank 3 is (H, Tq, Tk) when meta
///   says heads > 1 without average_heads (a rank-2 input split into heads), else
///   (B, Tq, Tk);
/// - masked cells: scores of −∞ (or equal to a finite meta.mask_fill) from the "scores"
///   tensor; for weights, only those that are also exactly 0 or NaN (so an average over
///   heads is not hidden). Weights without scores: exact zeros, which softmax gives only
///   for −∞ scores or complete underflow;
/// - labels: the document's tokens label the rows; the columns too when Tk = past
///   length + Tq (past keys get their index), otherwise indices;
/// - colour range 0..1 for weights, else from the data; title "stage · mask: … · scale:
///   … · batch b, head h" from meta.
/// Throws value_error ("--stage" not in the document, "--batch"/"--head" out of
/// range, token count ≠ Tq) and shape_error (stage not Tq×Tk shaped).
heatmap_spec heatmap_from_document(const document& doc, const heatmap_view& view);

}  // namespace attn::io
