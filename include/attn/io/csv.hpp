#pragma once
/// \file csv.hpp
/// Tidy long-format CSV, one value per line, readable by pandas.read_csv as is.

#include <iosfwd>
#include <string>

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

/// One input's part of a table of several (docs/design.md §6.2: several inputs into one
/// CSV): write_csv's lines without its header, each led by an `input` field holding
/// `input` (quoted as a tensor name is). Returns the header such a table has:
/// "input," then write_csv's. Throws as write_csv does.
std::string write_csv_rows(std::ostream& out, const document& doc, const text_style& style, const std::string& input);

/// The header line write_csv writes: "tensor,layer,batch,head,row,col,value\n" for a
/// document with a layer axis (layered), else "tensor,batch,head,row,col,value\n".
const char* csv_header(bool layered);

/// Streamed CSV of a run of several layers (docs/design.md §5.4): checks, before anything
/// is written, that every tensor of `layer` (one layer's document, no layer axis) can be
/// written as write_csv writes the run's `count` layers stacked. Throws shape_error (rank
/// above 4 per layer, with write_csv's message for the stacked shape), value_error (bytes
/// that do not match the shape).
void check_csv_layer(const document& layer, std::size_t count);

/// Streamed CSV: the lines write_csv writes for tensor `index` of one layer of a run of
/// several layers (the held document's tensor, sliced at that layer), with `number`, the
/// model's layer, in the `layer` column; no header. Concatenated tensor by tensor, each
/// tensor's layers in order, after csv_header(true), they are write_csv's bytes for the
/// stacked document. Throws io_error if `out` fails, shape_error / value_error as
/// check_csv_layer.
void write_csv_layer(std::ostream& out, const document& layer, std::size_t index, std::size_t number, const text_style& style);

}  // namespace attn::io
