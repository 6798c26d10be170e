#pragma once
/// \file analysis.hpp
/// The looking stages of a document that was computed elsewhere or without them
/// (docs/design.md §4.4): head statistics and attention rollout of its weights, as
/// `attn view`, `attn rollout` and `attn compute --format html` add them. The numerics are
/// core/analysis.hpp's; this floor (pipeline) reads the document's axes and masked cells
/// (io/writers.hpp) to call them.

#include <string>

#include "attn/io/document.hpp"
#include "attn/tensor.hpp"

namespace attn {

/// Adds head_stats.entropy, .max_weight, .distance, .sink_mass and .small_share
/// (core::head_stats, sink_k = 1) of the `weights` of `doc` when it has weights of rank
/// ≥ 2 and no head_stats yet (attn output written without them, or weights from
/// elsewhere): one value per (L·)B·H block, shaped as the weights' leading axes ((1,) for
/// a lone (Tq, Tk)), float64. A cell counts as visible unless io::masked_cells marks it.
/// Leaves `doc` as it is otherwise (no weights, Tq or Tk = 0). Throws nothing of its own.
void add_head_stats(io::document& doc);

/// Adds `rollout` (core::rollout, Abnar & Zuidema 2020, "Quantifying Attention Flow in
/// Transformers", eq. 1) of the weights of `doc`, which `attn view`'s page shows as one
/// more layer, when they have a layer axis of L ≥ 2 with Tq = Tk and `doc` holds no
/// rollout yet: a checkpoint run with --layer all, or a lone (L, B, H, T, T) array. The
/// result is (T, T) for one sequence without a batch axis, else (B, T, T), float64.
/// Leaves `doc` as it is otherwise, and for a run of listed layers (--layer 0,5), whose
/// product would skip blocks.
void add_rollout(io::document& doc);

/// `attn rollout`: the rollout (core::rollout, Abnar & Zuidema 2020, eq. 1) of `weights`
/// (L, B, H, T, T) or (L, H, T, T), e.g. Hugging Face output_attentions stacked; returns
/// (B, T, T) or (T, T) in float64. float32 weights are read in place. Throws shape_error
/// named by `source` for another rank ("rollout needs (L, B, H, T, T) or (L, H, T, T)
/// weights (expected rank 4 or 5, got (3, 3))"), Tq ≠ Tk, L < 2 or H = 0.
array rollout_of_weights(const array& weights, const std::string& source);

}  // namespace attn
