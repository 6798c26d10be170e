// meta, written in one place (meta.hpp): the call's settings from its description, and a
// checkpoint's model block. The key order is the writers' (and the golden outputs').
#include "meta.hpp"

#include <algorithm>
#include <variant>

#include "attn/core/posenc.hpp"
#include "attn/core/rope.hpp"
#include "attn/core/rope_scaling.hpp"

namespace attn::pipeline {

namespace {
/// meta.sink_k's place among the mask terms' entries: after sink_tokens (40), before
/// alibi_slopes (60).
constexpr int sink_k_place = 50;
}  // namespace

void write_call_meta(nlohmann::ordered_json& meta, const pipeline_options& o, const call_facts& f) {
    const core::mask_settings& m = o.attention.mask;
    meta["attn_version"] = ATTN_VERSION;
    meta["dtype"] = std::string(dtype_name(f.type));
    meta["scale"] = f.scale;
    meta["softcap"] = o.attention.softcap;
    meta["mask"] = f.masks_used;
    // Each mask term's entries (include/attn/core/masks/), and head_stats' sink_k among
    // them, by place: the key order meta has always had.
    std::vector<core::mask_record> entries = f.mask_records;
    if (f.head_stats) entries.push_back({sink_k_place, "sink_k", o.sink_k});
    std::stable_sort(entries.begin(), entries.end(),
                     [](const core::mask_record& a, const core::mask_record& b) { return a.place < b.place; });
    for (const core::mask_record& e : entries) std::visit([&](const auto& v) { meta[e.key] = v; }, e.value);
    if (m.fill) meta["mask_fill"] = *m.fill;
    else meta["mask_fill"] = "-Infinity";
    meta["masked_rows"] = core::masked_rows_name(o.attention.rows);
    if (o.kernel == kernel_kind::reference) meta["kernel"] = "reference";
    if (!f.sinks.empty()) meta["sinks"] = f.sinks;
    meta["heads"] = f.heads;
    meta["kv_heads"] = f.kv_heads;
    meta["past_length"] = f.past;
    if (f.projected)
        meta["weight_layout"] = f.packed_projection || o.layout == core::weight_layout::out_in ? "out-in" : "in-out";
    meta["average_heads"] = o.average_heads;
    if (o.q_temperature.beta != 0)
        meta["query_temperature"] = {{"beta", o.q_temperature.beta}, {"divisor", o.q_temperature.divisor}, {"offset", o.q_temperature.offset}};
    if (o.attention.rope) {
        meta["rope"] = core::rope_style_name(*o.attention.rope);
        if (!f.rope_from_tables) meta["rope_theta"] = o.attention.rope_theta;
        meta["rotary_dim"] = o.attention.rotary_dim ? o.attention.rotary_dim : f.head_width;
    }
    if (o.posenc) {
        meta["posenc"] = core::posenc_style_name(*o.posenc);
        meta["posenc_base"] = o.posenc_base;
    }
}

void write_layout_meta(nlohmann::ordered_json& meta, pipeline_options::input_layout layout) {
    using l = pipeline_options::input_layout;
    if (layout == l::bthd) meta["layout"] = "bthd";
    else if (layout == l::tbe) meta["seq_first"] = true;
}

nlohmann::ordered_json model_meta(const model::config& cfg, const checkpoint_options& ck) {
    nlohmann::ordered_json model;
    model["arch"] = cfg.family->name();
    if (!cfg.model_type.empty()) model["model_type"] = cfg.model_type;
    // A model_type no family reads, read as the family of its architectures class (Kimi K2).
    if (!cfg.architecture.empty()) model["read_as"] = cfg.architecture;
    model["checkpoint"] = ck.path;
    // A list (docs/design.md §5.4) says which layer index i of the leading axis is.
    const std::vector<std::size_t> attention = model::attention_layers(cfg);
    if (ck.layer) model["layer"] = *ck.layer;
    else if (!ck.layers.empty()) model["layer"] = ck.layers;
    else if (attention.size() < cfg.layers) model["layer"] = attention;  // a hybrid's (§6.1)
    else model["layer"] = "all";
    model["layers"] = cfg.layers;
    model["hidden_size"] = cfg.hidden;
    if (!ck.layer && cfg.sliding_window) {
        std::vector<std::size_t> sliding;
        for (std::size_t l = 0; l < cfg.layers; ++l)
            if (cfg.sliding[l]) sliding.push_back(l);
        model["sliding_window"] = *cfg.sliding_window;
        model["sliding_layers"] = sliding;
    }
    if (cfg.rope_scaling.kind != core::rope_scaling_kind::none) {
        const core::rope_scaling& s = cfg.rope_scaling;
        nlohmann::ordered_json rs;
        rs["rope_type"] = core::rope_scaling_kind_name(s.kind);
        rs["factor"] = s.factor;
        rs["original_max_position_embeddings"] = s.original_max_position_embeddings;
        if (s.kind == core::rope_scaling_kind::dynamic) rs["max_position_embeddings"] = s.max_position_embeddings;
        if (s.kind == core::rope_scaling_kind::llama3) {
            rs["low_freq_factor"] = s.low_freq_factor;
            rs["high_freq_factor"] = s.high_freq_factor;
        }
        if (s.kind == core::rope_scaling_kind::yarn) {
            rs["beta_fast"] = s.beta_fast;
            rs["beta_slow"] = s.beta_slow;
            if (s.mscale) rs["mscale"] = s.mscale;
            if (s.mscale_all_dim) rs["mscale_all_dim"] = s.mscale_all_dim;
            rs["truncate"] = s.truncate;
        }
        if (s.attention_factor) rs["attention_factor"] = *s.attention_factor;
        rs["rope_theta"] = cfg.rope_theta;
        model["rope_scaling"] = rs;
    }
    return model;
}

}  // namespace attn::pipeline
