#pragma once
/// \file table.hpp
/// Aligned matrices for a terminal (`--format table`), labelled with tokens.

#include <cstddef>
#include <iosfwd>

#include "attn/io/document.hpp"

namespace attn::io {

/// How write_table lays tensors out.
struct table_options {
    bool color = false;            ///< shade weights with 24-bit ANSI backgrounds
    bool full = false;             ///< print every element, however large (`--full`)
    std::size_t threshold = 1000;  ///< more elements than this: elide (NumPy's threshold)
    std::size_t edgeitems = 3;     ///< items kept at each end of an elided axis (NumPy's edgeitems)
};

/// Text a masked weight is printed as: U+00B7 MIDDLE DOT, one column wide.
inline constexpr const char* masked_cell = "\xC2\xB7";

/// Writes every tensor of `doc` as text for a human:
///
///     weights (2, 2)
///            my  name
///     my      1     ·
///     name  0.5   0.5
///
/// A title line "<name> <shape>" (NumPy tuple notation), then the last two axes as a
/// matrix, one block per leading index labelled "batch b" (rank 3), "batch b, head h"
/// (rank 4) or "index (i, j, …)" (rank ≥ 5); a rank-3 Tq×Tk stage whose first axis holds
/// heads (leading_axis_is_heads, writers.hpp) is labelled "head h". Blocks and tensors
/// are separated by a blank line. A 1-d tensor is one unlabelled row, a 0-d tensor one
/// number.
/// Row labels are doc.tokens when there are as many tokens as rows, else the row
/// index; column headers likewise with the columns. Numbers have style.precision
/// significant digits (4 when it is 0), non-finite values print as nan, inf, -inf.
/// Masked weights print as `·` (masked_cell), so that they stand apart from a true 0.
/// Which cells of the weights are masked is the writers' one rule, masked_cells
/// (writers.hpp): the mask stage's False, else a −∞ (or a finite meta.mask_fill) score of
/// the same shape, else every weight of exactly 0. A masked weight prints as `·` when it is 0; one that is NaN
/// (--masked-rows nan) prints as nan, and a fully masked row under a finite fill keeps
/// its uniform numbers.
/// Large tensors are elided as NumPy prints them: unless `options.full`, a tensor of
/// more than options.threshold elements shows only the first and last
/// options.edgeitems indices of every axis longer than 2·edgeitems — a row "..." in
/// place of the hidden rows, a column "..." in place of the hidden columns, and a
/// block "..." in place of hidden leading indices. Column widths are taken over the
/// cells shown.
/// Control characters in tokens and names (C0, DEL and C1: U+0080–U+009F) are shown as
/// \xHH, HH the code point, so that they cannot move the cursor or inject escape codes.
/// With options.color, cells of the weights (stage kind weights) get a 24-bit ANSI background
/// (ESC[48;2;R;G;Bm … ESC[0m) shading from white (0) to blue (1), values clamped to
/// [0, 1], NaN and masked cells left plain; without it no escape code is written at all.
/// Throws io_error if `out` fails.
void write_table(std::ostream& out, const document& doc, const text_style& style, const table_options& options);

/// write_table with the default options, and colour if `color`.
void write_table(std::ostream& out, const document& doc, const text_style& style, bool color);

}  // namespace attn::io
