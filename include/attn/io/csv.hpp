#pragma once
/// \file csv.hpp
/// Tidy long-format CSV, one value per line, readable by pandas.read_csv as is.

#include <iosfwd>

#include "attn/io/document.hpp"

namespace attn::io {

/// Writes the header `tensor,batch,head,row,col,value` and one line per element of
/// every tensor in `doc`. Index mapping by rank: 4-D (b,h,r,c); 3-D (b,r,c), head 0 —
/// except a Tq×Tk stage whose first axis holds heads (leading_axis_is_heads in
/// writers.hpp: a rank-2 input split into several heads, as meta says), which is
/// (h,r,c), batch 0; 2-D (r,c), batch 0, head 0; 1-D (r), col 0; 0-D all 0. Numbers as in write_json;
/// non-finite values are "nan", "inf", "-inf" (parsed by pandas and numpy.loadtxt).
/// Tensor names containing a comma, quote or newline are quoted (RFC 4180).
/// Throws io_error if `out` fails, shape_error (before writing anything) for a tensor of
/// rank above 4, value_error if a tensor's bytes do not match its shape.
void write_csv(std::ostream& out, const document& doc, const text_style& style);

}  // namespace attn::io
