#pragma once
/// \file table.hpp
/// Aligned matrices for a terminal (`--format table`), labelled with tokens.

#include <iosfwd>

#include "attn/io/document.hpp"

namespace attn::io {

/// Writes every tensor of `doc` as text for a human:
///
///     weights (2, 2)
///            my  name
///     my      1     0
///     name  0.5   0.5
///
/// A title line "<name> <shape>" (NumPy tuple notation), then the last two axes as a
/// matrix, one block per leading index labelled "batch b" (rank 3), "batch b, head h"
/// (rank 4) or "index (i, j, …)" (rank ≥ 5); a rank-3 Tq×Tk stage whose first axis holds
/// heads (leading_axis_is_heads, writers.hpp) is labelled "head h". Blocks and tensors
/// are separated by a blank line. A 1-d tensor is one unlabelled row, a 0-d tensor one number.
/// Row labels are doc.tokens when there are as many tokens as rows, else the row
/// index; column headers likewise with the columns. Numbers have style.precision
/// significant digits (4 when it is 0), non-finite values print as nan, inf, -inf.
/// Control characters in tokens and names (C0, DEL and C1: U+0080–U+009F) are shown as
/// \xHH, HH the code point, so that they cannot move the cursor or inject escape codes.
/// With `color`, cells of a tensor named "weights" get a 24-bit ANSI background
/// (ESC[48;2;R;G;Bm … ESC[0m) shading from white (0) to blue (1), values clamped to
/// [0, 1], NaN left plain; without `color` no escape code is written at all.
/// Throws io_error if `out` fails.
void write_table(std::ostream& out, const document& doc, const text_style& style, bool color);

}  // namespace attn::io
