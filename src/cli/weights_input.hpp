#pragma once
// The weights array of rollout and compare --per-head: FILE:NAME, a file holding one
// array, or a bundle holding `weights` (attn compute's .npz or JSON output).
#include <string>

#include "attn/error.hpp"
#include "attn/io/input.hpp"
#include "attn/io/listing.hpp"
#include "attn/stages.hpp"
#include "attn/text.hpp"

namespace attn::cli {

/// The array `spec` names: "FILE:NAME" as io::load_array reads it (a path that exists as
/// written is never split); "FILE" (or "-") holding one array; or a bundle with an array
/// called `weights` (any case). Throws what the readers throw, and value_error naming
/// the file and its arrays when a bundle holds several and none is `weights`.
inline array load_weights(const std::string& spec) {
    if (spec != "-" && !io::split_array_spec(spec).second.empty()) return io::load_array(spec);
    std::vector<io::listed_array> all = io::list_arrays(spec);
    if (all.size() == 1) return std::move(all.front().value);
    std::string names;
    for (auto& a : all) {
        if (lower(a.name) == stage_name(stage::weights)) return std::move(a.value);
        names += (names.empty() ? "" : ", ") + a.name;
    }
    throw value_error(spec, "no weights array " + expected_got("one array, one named weights, or FILE:NAME",
                                                             names.empty() ? "no arrays" : names));
}

}  // namespace attn::cli
