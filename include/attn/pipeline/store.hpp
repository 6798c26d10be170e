#pragma once
/// \file store.hpp
/// Half-precision output (docs/design.md §5.4, `--store`): the Tq×Tk stages of a document
/// rounded to float16 or bfloat16 before they are written, halving a whole-model dump.

#include <string>

#include "attn/io/document.hpp"

namespace attn {

/// How the Tq×Tk stages are stored: as computed, IEEE float16 (NumPy reads it as is), or
/// bfloat16 kept as its uint16 bit patterns (NumPy has no bfloat16:
/// `(a.astype(np.uint32) << 16).view(np.float32)` reads it back, or
/// `torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)`).
enum class store_type { computed, float16, bfloat16 };

/// "float16" or "bfloat16" (and "computed"). Throws usage_error("store", "unknown type
/// '<name>' (expected float16 or bfloat16)").
store_type parse_store_type(const std::string& name);

/// Rounds the float tensors of `doc` whose stage kind is logits, scores or weights (qk,
/// scaled, scores, weights, with or without a layer axis) to `type` — float_to_half or
/// float_to_bfloat16 of each element (include/attn/tensor.hpp) — and records it in
/// meta.store ("float16", or "bfloat16" with meta.store_bits "uint16"). The mask (bool),
/// head_stats and rollout (float64) and the per-token stages are left as they are.
/// Does nothing for store_type::computed. Throws nothing.
void store_matrices(io::document& doc, store_type type);

}  // namespace attn
