#pragma once
/// \file document.hpp
/// What `attn compute` writes: a `meta` object, optional tokens and the dumped stages,
/// in dump order. Every writer (json, jsonl, csv, npy, npz, table) takes one.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/io/npz.hpp"

namespace attn::io {

/// One compute result as the writers see it (docs/design.md §2 Outputs).
struct document {
    std::string input;                     ///< batch runs: the input's name, written first
    nlohmann::ordered_json meta;           ///< settings used and tensor shapes (JSON object)
    std::vector<std::string> tokens;       ///< labels of the query rows (and keys when Tk = Tq)
    std::vector<std::string> tokens_kv;    ///< labels of the keys (cross-attention), Tk of them, or empty
    std::vector<std::string> words;        ///< labels of word_weights' rows and columns (text in, --words), or empty
    std::vector<named_array> tensors;      ///< stages by name, float32 or float64
};

/// How numbers are printed by the text writers.
struct text_style {
    int precision = 0;     ///< significant digits; 0 = shortest text that round-trips
    bool compact = false;  ///< json: everything on one line
    bool full = false;     ///< table: every element, none elided (NumPy's threshold=sys.maxsize)
    bool nonfinite_null = false;  ///< json, jsonl: NaN and ±∞ as null, not "NaN"/"Infinity" (--json-nonfinite null)
};

}  // namespace attn::io
