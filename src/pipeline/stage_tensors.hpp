#pragma once
// The stages of the pipeline (src/pipeline): the stage names, and each stage's tensor in
// the input's layout (docs/design.md §2 "Tensor shapes"), viewing the kernel's result where it can.
// Internal to the pipeline; the entry point is include/attn/pipeline.hpp.

#include <memory>
#include <string>
#include <vector>

#include "attn/core/analysis.hpp"
#include "attn/core/attention.hpp"
#include "attn/io/document.hpp"
#include "attn/stages.hpp"
#include "attn/tensor.hpp"

namespace attn::pipeline {

using namespace attn::core;

// The stages, their names and parse_stage are the stage table's (attn/stages.hpp).
using attn::parse_stage;
using attn::stage;
using attn::stage_name;

/// Mean over the head axis: (B, H, R, C) → (B, 1, R, C).
template <class T>
tensor4<T> mean_heads(const tensor4<T>& t);

/// Shape of a (B, H, R, C) stage in the input's layout (docs/design.md §2): the head axis is
/// dropped when there is one head and the input had no head axis, and the batch axis
/// when the input had none (rank 2: (H, R, C) as PyTorch's unbatched MHA gives).
shape_t layout_shape(const shape_t& full, std::size_t input_rank);

/// An array viewing `t`'s elements in place (no copy); `owner` keeps them alive.
template <class Tensor>
array view_of(shape_t shape, std::shared_ptr<const void> owner, const Tensor& t) {
    return array::view(std::move(shape), std::move(owner), t.data());
}

/// A temporary tensor moved into shared ownership, as an array (no copy).
template <class Tensor>
array adopt(shape_t shape, Tensor&& t) {
    auto owned = std::make_shared<std::decay_t<Tensor>>(std::forward<Tensor>(t));
    const auto* values = owned->data();
    return array::view(std::move(shape), std::move(owned), values);
}

/// (B, H, T, D) in the input's layout: 4-D as is; rank 3 → (B, T, H·D); rank 2 → (T, H·D).
/// `owner` keeps `t` alive; a 4-D result views it, the others are merged copies.
template <class T>
array in_input_layout(const tensor4<T>& t, std::size_t input_rank, std::shared_ptr<const void> owner);

/// A Tq×Tk (or lse) stage in the input's leading axes, viewing `t` (kept by `owner`).
template <class T>
array stage_array(const tensor4<T>& t, std::size_t input_rank, std::shared_ptr<const void> owner);

/// The `mask` stage: the combined mask of `m` as a bool array shaped like the scores in
/// the input's layout, True = the query may attend the key (mask<T>::attend_row). With
/// average_heads (scores averaged over heads) a cell is True when some head attends it.
template <class T>
array combined_mask(const mask<T>& m, std::size_t input_rank, bool average_heads);

/// The bytes a run plans for its Tq×Tk stages before they are allocated: every Tq×Tk
/// tensor the kernel keeps (qk, scaled, scores, weights: B·H·Tq·Tk elements of
/// `element_bytes` each), their head means under --average-heads, and the `mask` stage
/// (one byte a cell), for each of `layers` layers (a layered run holds every layer, then
/// stacks them: twice). Computed in double so that no product overflows.
double planned_stage_bytes(const std::vector<stage>& stages, const attention_options& ao, bool average_heads,
                           std::size_t B, std::size_t H, std::size_t Tq, std::size_t Tk, std::size_t element_bytes,
                           std::size_t layers);

/// True when a run dumping `dump` may compute the weights one query head at a time
/// (core::attention_by_head, docs/design.md §5.4): it writes no Tq×Tk stage of a whole
/// layer (weights, qk, scaled, scores) and nothing read from every head at once (stats,
/// --average-heads).
bool weights_by_head_allowed(const std::vector<std::string>& dump, bool average_heads);

/// meta.shapes: every tensor's shape by name, as the document now holds them.
void record_shapes(io::document& doc);

/// The `stats` stage as tensors "stats.dk", "stats.var_q", … (stats.hpp): the variances
/// 0-d, the row statistics shaped like lse (the Tq×Tk stage shape without the key
/// axis). With --average-heads the row statistics describe the head-averaged weights
/// (the weights that are dumped); the variances always cover every head.
/// dk and argmax are int64, the rest in the compute dtype.
template <class T>
void append_stats(io::document& doc, const tensor4<T>& q, const tensor4<T>& k, const attention_result<T>& r,
                  std::size_t rank, bool average_heads);

/// The `head_stats` stage (docs/design.md §4.4, core/analysis.hpp), built one query
/// head at a time: add() takes a head's weights as they are computed, append() writes
/// the tensors "head_stats.entropy", ".max_weight", ".distance", ".sink_mass",
/// ".small_share", each (B, H), or (H,) for an input without a batch axis (rank 2), in
/// the compute dtype. Always per query head of the softmax weights, --average-heads or
/// not; a cell is visible when the combined mask `m` lets the query see the key
/// (mask<T>::attend_row).
template <class T>
class head_stats_table {
public:
    /// For m's B items and H heads. sink_k as core::head_stats takes it.
    head_stats_table(const mask<T>& m, std::size_t sink_k);
    /// Head h of item b: its (Tq, Tk) weights, C order.
    void add(std::size_t b, std::size_t h, const T* weights);
    /// The five tensors, in the input's leading axes (`rank`).
    void append(io::document& doc, std::size_t rank) const;

private:
    const mask<T>& m_;
    std::size_t sink_k_;
    head_statistics all_;               // B·H entries each, item-major
    std::vector<unsigned char> visible_;  // (Tq, Tk) of the head being added
};

/// head_stats_table over every head of r.weights (which must be kept), appended to `doc`.
template <class T>
void append_head_stats(io::document& doc, const attention_result<T>& r, const mask<T>& m, std::size_t rank,
                       std::size_t sink_k);

}  // namespace attn::pipeline
