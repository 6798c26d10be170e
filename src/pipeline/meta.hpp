#pragma once
// `meta`, written in one place (docs/design.md §3.1 item 1): every setting of an attention
// call from its description (pipeline_options and its core::attention_call), with what the
// run found out (shapes, the masks applied, the slopes and lengths used), and a checkpoint
// run's `model` block. compute.cpp and checkpoint.cpp call these; nothing else writes
// settings into meta. Internal to the pipeline.

#include <cstddef>
#include <string>
#include <vector>

#include "attn/core/masks.hpp"
#include "attn/io/document.hpp"
#include "attn/model/config.hpp"
#include "attn/pipeline.hpp"

namespace attn::pipeline {

/// What one call found out that its description does not hold: the compute dtype, the
/// scale used (the default resolved), the masks applied in build order, the shapes, and
/// the values taken from the inputs.
struct call_facts {
    dtype type = dtype::f8;
    double scale = 1.0;
    std::vector<std::string> masks_used;   ///< build_mask's `used`
    std::vector<core::mask_record> mask_records;  ///< what each mask term records (core::mask_records)
    std::vector<double> sinks;             ///< the sink logits applied, or empty
    std::size_t heads = 1, kv_heads = 1, past = 0, head_width = 0;
    bool projected = false;                ///< Q, K, V came from projections
    bool packed_projection = false;        ///< … from a packed in_proj_weight (always out-in)
    bool rope_from_tables = false;         ///< RoPE angles from rope_cos/rope_sin, not theta
    bool head_stats = false;               ///< head_stats was dumped (sink_k is recorded)
};

/// Writes the call's settings into `meta` (an object), in the order the writers show
/// them: attn_version, dtype, scale, softcap, mask (the conventions applied) and each mask
/// term's entries by their place (causal_align, window, prefix_len, sink_tokens, then
/// sink_k with head_stats, alibi_slopes, lengths, pad_id), mask_fill, masked_rows, kernel, sinks, heads, kv_heads, past_length,
/// weight_layout, average_heads, rope, posenc. Throws nothing but std::bad_alloc.
void write_call_meta(nlohmann::ordered_json& meta, const pipeline_options& o, const call_facts& facts);

/// `meta.layout` / `meta.seq_first`: the declared layout the stages were returned in, when
/// it is not the one read by rank.
void write_layout_meta(nlohmann::ordered_json& meta, pipeline_options::input_layout layout);

/// A checkpoint run's `model` block (docs/design.md §4.3): arch, model_type, checkpoint,
/// layer (N, the ascending list of --layer 0,5,10-12, or "all"), layers (the model's
/// count), hidden_size, the sliding layers (a list or all layers), rope_scaling.
nlohmann::ordered_json model_meta(const model::config& cfg, const checkpoint_options& ck);

}  // namespace attn::pipeline
