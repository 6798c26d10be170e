// Nemotron-H (transformers models/nemotron_h/modeling_nemotron_h.py: NemotronHModel,
// NemotronHBlock, NemotronHMamba2Mixer, NemotronHAttention, NemotronHMLP, NemotronHRMSNorm,
// Zamba2RMSNormGated; NemotronHConfig), a hybrid (docs/design.md §6.1 "Layers without softmax
// attention") whose every block is one mixer: out = x + mixer(norm(x)), NemotronHRMSNorm
// x·rsqrt(mean(x²) + layer_norm_epsilon)·w (block_structure::mixer_only), the mixer by
// hybrid_override_pattern's letter (NemotronHConfig._pattern_to_list; layers_block_type when
// written instead):
//   "*" attention  NemotronHAttention: q/k/v/o_proj (biases when attention_bias), no RoPE
//                  (NoPE: the q and k stages are q_proj and k_proj), GQA, causal, scale
//                  head_dim^−½ with head_dim as the config gives it (default 128).
//   "M" mamba      NemotronHMamba2Mixer without a cache: in_proj(n) = z | xBC | dt
//                  (intermediate = mamba_num_heads·mamba_head_dim, conv_dim = intermediate +
//                  2·n_groups·ssm_state_size, mamba_num_heads); xBC through the depthwise
//                  causal conv1d (conv_kernel taps, first T outputs) and mamba_hidden_act;
//                  x | B | C; dt = softplus(dt + dt_bias) clamped to time_step_limit;
//                  A = −exp(A_log); the selective scan S_t = exp(dt_t·A)·S_{t−1} +
//                  dt_t·x_t⊗B_t, y_t = S_t·C_t + D·x_t per head, B and C of head h from
//                  group h / (heads / n_groups); y·silu(z) RMS-normalised per group of
//                  intermediate / n_groups values, ·norm.weight (Zamba2RMSNormGated,
//                  norm_before_gate false); out_proj. No attention stages.
//   "-" mlp        NemotronHMLP: down_proj(act(up_proj(n))), mlp_hidden_act relu2 = relu(v)²,
//                  non-gated, biases when mlp_bias. No attention stages.
//   "E" moe        NemotronHMoE (the "Nemotron 3 Nano" block): router logits gate(n) in
//                  float32 (NemotronHTopkRouter), scores σ(logits); the choice ranks scores +
//                  e_score_correction_bias over n_group groups (a group's score the sum of
//                  its top 2, the topk_group best kept, the others' experts −∞), the top
//                  num_experts_per_tok of those; each chosen expert's weight its score
//                  without the bias, divided by the chosen scores' sum + 1e-20 when
//                  norm_topk_prob, times routed_scaling_factor; the experts
//                  down_proj(relu(up_proj(n))²) of moe_intermediate_size, non-gated, no
//                  biases (NemotronHExperts; model::sparse_moe's sigmoid_grouped routing,
//                  DeepSeek-V3's but for the −∞), plus shared_experts = NemotronHMLP of
//                  moe_shared_expert_intermediate_size, unscaled. With moe_latent_size
//                  (Nemotron 3 Super's latent MoE) the routed experts read
//                  fc1_latent_proj(n) and their sum goes through fc2_latent_proj; the
//                  router and the shared expert read n. No attention stages.
// norm_f comes after the last layer (attn's stages end before it).
//
// Where transformers' torch_forward (the slow path, inherited from Zamba2MambaMixer) differs
// from what its own kernels path, the Hub checkpoints' modeling_nemotron_h.py and Mamba2
// compute, attn follows the latter (the docs' nemotron_h section says why): the scan is the
// sequential recurrence above, which the chunked SSD form equals once its inter-chunk sum runs
// over the source chunk (torch_forward's `.sum(dim=2)` runs over the target, so no state crosses
// a chunk boundary, as Mamba2's own mixer did before its fix), and dt is clamped to
// time_step_limit (the kernels' dt_limit; torch_forward floors it at time_step_min instead).
// The scan runs in double whatever the compute type; chunk_size changes nothing.
//
// Padding as torch_forward has it: with an attention_mask (B, T) that is not all ones, a Mamba2
// mixer multiplies its input by it before in_proj and the conv's activated output after it
// (NemotronHModel._update_mamba_mask hands it the 2-D mask, or None when every entry is 1); the
// attention layers mask the padded keys; the MLP layers see no mask.
#include <cmath>
#include <algorithm>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <omp.h>

#include "attn/error.hpp"
#include "attn/model/blocks.hpp"
#include "attn/model/moe.hpp"
#include "attn/model/moe_family.hpp"
#include "attn/model/registry.hpp"
#include "attn/text.hpp"
#include "attn/threads.hpp"
#include "shared.hpp"

namespace attn::model {

namespace {

std::string key(std::size_t layer, const std::string& rest) { return layer_key("layers.", layer, rest); }
std::string mixer(std::size_t layer, const std::string& rest) { return key(layer, "mixer." + rest); }

/// NemotronHConfig's keys only this family reads.
struct nemotron_h_fields : family_fields {
    std::size_t mamba_heads = 128;     ///< mamba_num_heads
    std::size_t mamba_head_dim = 64;   ///< mamba_head_dim
    std::size_t groups = 8;            ///< n_groups (mamba_n_groups first)
    std::size_t state = 128;           ///< ssm_state_size
    std::size_t conv_taps = 4;         ///< conv_kernel (mamba_d_conv first)
    bool conv_bias = true;             ///< use_conv_bias (mamba_conv_bias first)
    bool proj_bias = false;            ///< use_bias: in_proj and out_proj biases
    activation mamba_act = activation::silu;  ///< mamba_hidden_act, after the conv
    double dt_low = 0.0, dt_high = std::numeric_limits<double>::infinity();  ///< time_step_limit
    bool attention_bias = false;       ///< attention_bias: q/k/v/o_proj biases
    // NemotronHMoE's keys (the "E" / "moe" layers):
    std::size_t experts = 8;              ///< n_routed_experts (num_local_experts)
    std::size_t top_k = 2;                ///< num_experts_per_tok
    std::size_t moe_intermediate = 7688;  ///< moe_intermediate_size: each routed expert's width
    std::size_t shared_intermediate = 7688;  ///< moe_shared_expert_intermediate_size
    std::size_t moe_groups = 1, topk_groups = 1;  ///< n_group, topk_group
    bool norm_topk_prob = true;           ///< norm_topk_prob
    double routed_scaling = 1.0;          ///< routed_scaling_factor
    std::size_t moe_latent = 0;           ///< moe_latent_size (0: null, no latent projections)

    std::size_t inner() const { return mamba_heads * mamba_head_dim; }
    std::size_t conv_dim() const { return inner() + 2 * groups * state; }
};

/// What a Mamba layer's tensors are: the in_proj rows as a sum, for messages.
const char* const in_proj_rows = "2·mamba_num_heads·mamba_head_dim + 2·n_groups·ssm_state_size + mamba_num_heads × hidden_size";

/// One bound of time_step_limit: a number, or Python's Infinity / -Infinity as config.json
/// writes them (read as the strings "Infinity", "-Infinity").
double limit_bound(const config_reader& r, const nlohmann::json& v, const char* which) {
    if (v.is_number()) return v.get<double>();
    if (v == "Infinity") return std::numeric_limits<double>::infinity();
    if (v == "-Infinity") return -std::numeric_limits<double>::infinity();
    throw value_error(r.source(), std::string("time_step_limit: its ") + which + " bound is not a number " +
                                      expected_got("[low, high], numbers or Infinity", v.dump().substr(0, 40)));
}

/// time_step_limit (mamba_dt_limit first, as NemotronHConfig.__post_init__ reads it): [low,
/// high], low ≤ high; null: no clamp.
void read_time_step_limit(const config_reader& r, nemotron_h_fields& g) {
    const char* name = r.contains("mamba_dt_limit") ? "mamba_dt_limit" : "time_step_limit";
    const nlohmann::json* v = r.find(name);
    if (!v) {
        g.dt_low = -std::numeric_limits<double>::infinity();  // null: the kernels get no dt_limit
        if (!r.contains(name)) g.dt_low = 0.0;                // absent: NemotronHConfig's (0.0, inf)
        return;
    }
    if (!v->is_array() || v->size() != 2)
        throw value_error(r.source(), std::string(name) + ": not a pair of bounds " +
                                          expected_got("[low, high]", v->dump().substr(0, 80)));
    g.dt_low = limit_bound(r, (*v)[0], "low");
    g.dt_high = limit_bound(r, (*v)[1], "high");
    if (!(g.dt_low <= g.dt_high))
        throw value_error(r.source(), std::string(name) + ": its low bound is above its high one " +
                                          expected_got("low ≤ high", v->dump().substr(0, 80)));
}

/// Per layer: "" (attention), "mamba" or "mlp", from layers_block_type when written (its
/// legacy names "mamba" / "attention" or transformers v5's "linear_attention" /
/// "full_attention", as remap_legacy_layer_types maps them), else hybrid_override_pattern
/// ("M", "*", "-", "E"); "moe" / "E" layers read as "moe". Then num_hidden_layers, when
/// written, must count them (NemotronHConfig derives the count from the pattern and only warns).
void read_layer_types(const config_reader& r, config& c) {
    std::vector<std::string> types;
    if (const nlohmann::json* list = r.find("layers_block_type")) {
        if (!list->is_array())
            throw value_error(r.source(), "layers_block_type: not a list of layer types " +
                                              expected_got("[\"mamba\", \"attention\", …]", list->dump().substr(0, 80)));
        for (std::size_t l = 0; l < list->size(); ++l) {
            const nlohmann::json& e = (*list)[l];
            const std::string at = "layers_block_type[" + std::to_string(l) + "]: ";
            if (e == "mamba" || e == "linear_attention") types.push_back("mamba");
            else if (e == "attention" || e == "full_attention") types.push_back("");
            else if (e == "mlp") types.push_back("mlp");
            else if (e == "moe") types.push_back("moe");
            else
                throw value_error(r.source(), at + "not a Nemotron-H layer type " +
                                                  expected_got("\"mamba\", \"attention\", \"mlp\" or \"moe\"", e.dump().substr(0, 40)));
        }
    } else {
        const nlohmann::json* p = r.find("hybrid_override_pattern");
        if (!p || !p->is_string())
            throw value_error(r.source(), "hybrid_override_pattern: not the layers' pattern " +
                                              expected_got("a string of M, *, - and E (as \"M-M*E\"), or layers_block_type",
                                                           p ? p->dump().substr(0, 40) : "none"));
        const std::string s = p->get<std::string>();
        for (std::size_t l = 0; l < s.size(); ++l) {
            const std::string at = "hybrid_override_pattern[" + std::to_string(l) + "]: ";
            const char ch = s[l];
            if (ch == 'M') types.push_back("mamba");
            else if (ch == '*') types.push_back("");
            else if (ch == '-') types.push_back("mlp");
            else if (ch == 'E') types.push_back("moe");
            else
                throw value_error(r.source(), at + "not a Nemotron-H layer letter " +
                                                  expected_got("M (Mamba2), * (attention), - (MLP) or E (MoE)",
                                                               "\"" + s.substr(l, 1) + "\""));
        }
    }
    const char* source_key = r.find("layers_block_type") ? "layers_block_type" : "hybrid_override_pattern";
    if (types.empty() || types.size() > max_config_count)
        throw value_error(r.source(), std::string(source_key) + ": no layers " +
                                          expected_got("1 to " + std::to_string(max_config_count) + " layers", std::to_string(types.size())));
    if (r.find("num_hidden_layers") && r.size({"num_hidden_layers"}, 0) != types.size())
        throw value_error(r.source(), std::string(source_key) + ": not one layer per num_hidden_layers " +
                                          expected_got(std::to_string(r.size({"num_hidden_layers"}, 0)) + " layers",
                                                       std::to_string(types.size())));
    c.layers = types.size();
    c.mixer_types = std::move(types);
}

/// A boolean under the first of `keys` written (NemotronHConfig's legacy mamba_* names first).
bool flag_of(const config_reader& r, std::initializer_list<const char*> keys, bool fallback) {
    for (const char* k : keys)
        if (r.contains(k)) return r.flag(k, fallback);
    return fallback;
}

/// NemotronHConfig's MoE keys, read when a layer is "moe": n_routed_experts 8 (its alias
/// num_local_experts when written instead), num_experts_per_tok 2, moe_intermediate_size
/// 7688, moe_shared_expert_intermediate_size 7688, n_group 1, topk_group 1, norm_topk_prob
/// true, routed_scaling_factor 1.0; n_shared_experts is not read (NemotronHMoE builds one
/// shared expert whatever it says), moe_latent_size null (a number: the routed experts work in
/// that width, between fc1_latent_proj and fc2_latent_proj). Refused: a latent MoE with
/// mlp_bias (its projections' biases), an mlp_hidden_act other than relu2 (the
/// experts attn computes), n_group not splitting the experts into groups of 2 or more,
/// topk_group above n_group, num_experts_per_tok above the experts or above those of
/// topk_group groups.
void read_moe(const config_reader& r, const config& c, nemotron_h_fields& g) {
    g.experts = r.size({"n_routed_experts", "num_local_experts"}, 8);
    g.top_k = r.size({"num_experts_per_tok"}, 2);
    g.moe_intermediate = r.size({"moe_intermediate_size"}, 7688);
    g.shared_intermediate = r.size({"moe_shared_expert_intermediate_size"}, 7688);
    g.moe_groups = r.size({"n_group"}, 1);
    g.topk_groups = r.size({"topk_group"}, 1);
    g.norm_topk_prob = r.flag("norm_topk_prob", true);
    g.routed_scaling = r.number({"routed_scaling_factor"}, 1.0);
    if (r.find("moe_latent_size")) g.moe_latent = r.size({"moe_latent_size"}, 0);
    if (g.moe_latent && c.mlp_bias)
        throw value_error(r.source(), "moe_latent_size: fc1_latent_proj and fc2_latent_proj with biases (mlp_bias) are not implemented by attn " +
                                          expected_got("mlp_bias false", "true"));
    if (c.act != activation::relu2)
        throw value_error(r.source(), "mlp_hidden_act: not implemented by attn for MoE experts, which are relu²-activated here " +
                                          expected_got("\"relu2\"", "\"" + r.text({"mlp_hidden_act"}, "") + "\""));
    if (g.top_k > g.experts)
        throw value_error(r.source(), "num_experts_per_tok: more than n_routed_experts " +
                                          expected_got("at most " + std::to_string(g.experts), std::to_string(g.top_k)));
    if (g.experts % g.moe_groups != 0 || g.experts / g.moe_groups < 2)
        throw value_error(r.source(), "n_group: does not split n_routed_experts into groups of 2 or more " +
                                          expected_got("a divisor of " + std::to_string(g.experts) + " leaving ≥ 2 per group",
                                                       std::to_string(g.moe_groups)));
    if (g.topk_groups > g.moe_groups)
        throw value_error(r.source(), "topk_group: more than n_group " +
                                          expected_got("≤ " + std::to_string(g.moe_groups), std::to_string(g.topk_groups)));
    if (g.top_k > g.topk_groups * (g.experts / g.moe_groups))
        throw value_error(r.source(), "num_experts_per_tok: more than the experts of topk_group groups " +
                                          expected_got("≤ " + std::to_string(g.topk_groups * (g.experts / g.moe_groups)),
                                                       std::to_string(g.top_k)));
}

/// NemotronHConfig: vocab 131072, hidden 4096, 32 heads over 8 KV heads of head_dim 128,
/// intermediate_size 21504 (the MLP layers), 4096 positions, layer_norm_epsilon 1e-5,
/// mlp_hidden_act relu2, mlp_bias false, attention_bias false; the Mamba2 mixers' mamba_num_heads
/// 128 × mamba_head_dim 64, n_groups 8, ssm_state_size 128, conv_kernel 4, use_conv_bias true,
/// use_bias false, mamba_hidden_act silu, time_step_limit (0, inf); the layers from
/// layers_block_type or hybrid_override_pattern; with a MoE layer, NemotronHMoE's keys
/// (read_moe).
void read_config(const config_reader& r, config& c) {
    read_sizes(r, c, {4096, 1, 32, 21504, 4096, 131072});
    read_layer_types(r, c);
    c.kv_heads = r.size({"num_key_value_heads"}, 8);
    c.norm_eps = r.number({"layer_norm_epsilon"}, 1e-5);
    c.act = r.act("mlp_hidden_act", "relu2");
    c.mlp_bias = r.flag("mlp_bias", false);
    c.sliding.assign(c.layers, false);
    auto g = std::make_shared<nemotron_h_fields>();
    g->attention_bias = r.flag("attention_bias", false);
    c.qkv_bias = c.o_bias = g->attention_bias;
    g->mamba_heads = r.size({"mamba_num_heads"}, 128);
    g->mamba_head_dim = r.size({"mamba_head_dim"}, 64);
    g->groups = r.size({"mamba_n_groups", "n_groups"}, 8);
    g->state = r.size({"ssm_state_size"}, 128);
    g->conv_taps = r.size({"mamba_d_conv", "conv_kernel"}, 4);
    g->conv_bias = flag_of(r, {"mamba_conv_bias", "use_conv_bias"}, true);
    g->proj_bias = r.flag("use_bias", false);
    g->mamba_act = r.act("mamba_hidden_act", "silu");
    read_time_step_limit(r, *g);
    if (g->mamba_heads % g->groups != 0)
        throw value_error(r.source(), "n_groups: does not divide mamba_num_heads " +
                                          expected_got("a divisor of " + std::to_string(g->mamba_heads), std::to_string(g->groups)));
    if (std::find(c.mixer_types.begin(), c.mixer_types.end(), "moe") != c.mixer_types.end()) read_moe(r, c, *g);
    c.own = std::move(g);
}

/// The embedding's local name: transformers' "embeddings.weight", or the "embedding.weight"
/// its conversion mapping renames to it.
std::string embedding_name(const family& f) {
    return f.maybe("embedding.weight") && !f.maybe("embeddings.weight") ? "embedding.weight" : "embeddings.weight";
}

/// The config.json a Nemotron-H checkpoint stands for, as far as its shapes tell: sizes from
/// the embedding, each layer's letter by its mixer's tensors (q_proj *, in_proj M, up_proj -,
/// anything else E), head_dim and num_key_value_heads from the first attention layer, the
/// MLP width from up_proj, the biases from the tensors present. A Mamba2 layer's n_groups and
/// ssm_state_size are not in its shapes (its conv1d holds 2·n_groups·ssm_state_size channels
/// beyond the heads'), so a checkpoint with one needs config.json; so does one with a MoE
/// layer, whose num_experts_per_tok is not in its shapes (moe_config_from_tensors' refusal).
nlohmann::json from_tensors(const tensor_shapes& t) {
    const std::string emb = t.has("embeddings.weight") || !t.has("embedding.weight") ? "embeddings.weight" : "embedding.weight";
    const shape_t& e = t.need(emb, "vocab_size");
    nlohmann::json j = {{"model_type", "nemotron_h"}, {"vocab_size", e[0]}, {"hidden_size", e[1]}, {"num_attention_heads", t.heads}};
    const std::size_t L = t.count_layers("layers.", "norm.weight");
    std::string pattern;
    for (std::size_t l = 0; l < L; ++l) {
        if (t.has(mixer(l, "q_proj.weight"))) pattern += '*';
        else if (t.has(mixer(l, "in_proj.weight"))) pattern += 'M';
        else if (t.has(mixer(l, "up_proj.weight"))) pattern += '-';
        else pattern += 'E';
    }
    j["hybrid_override_pattern"] = pattern;
    j["num_hidden_layers"] = L;
    for (std::size_t l = 0; l < L; ++l) {
        if (pattern[l] == 'M')
            throw value_error(t.source, "n_groups: not in the tensors' shapes " +
                                            expected_got("--config FILE giving n_groups and ssm_state_size", "Mamba2 layer " + std::to_string(l)));
        if (pattern[l] == 'E') moe_config_from_tensors(t);  // throws
        if (pattern[l] == '*' && !j.contains("head_dim")) {
            const std::size_t d = t.head_dim_of(mixer(l, "q_proj.weight"), 0);
            j["head_dim"] = d;
            j["num_key_value_heads"] = t.kv_heads ? t.kv_heads : t.need(mixer(l, "k_proj.weight"), "num_key_value_heads")[0] / d;
            j["attention_bias"] = t.has(mixer(l, "q_proj.bias"));
        }
        if (pattern[l] == '-' && !j.contains("intermediate_size")) {
            j["intermediate_size"] = t.need(mixer(l, "up_proj.weight"), "intermediate_size")[0];
            j["mlp_bias"] = t.has(mixer(l, "up_proj.bias"));
        }
    }
    return j;
}

/// A bias the config says the model has not: transformers would build the Linear without one
/// and compute another model.
void refuse_bias(const family& f, const std::string& local, const char* flag) {
    if (f.maybe(local))
        throw value_error(f.name(local), std::string("in the checkpoint, but ") + flag + " is false " +
                                             expected_got(std::string("no bias tensor, or ") + flag + " true", "a bias"));
}

void check(const family& f) {
    const config& c = f.settings();
    const nemotron_h_fields& g = c.fields<nemotron_h_fields>();
    const std::size_t E = c.hidden, D = c.head_dim, I = g.inner(), Cd = g.conv_dim(), Hm = g.mamba_heads;
    f.expect_shape(embedding_name(f), {c.vocab, E}, "vocab_size × hidden_size");
    for (std::size_t l = 0; l < c.layers; ++l) {
        f.expect_shape(key(l, "norm.weight"), {E}, "hidden_size");
        if (attention_layer(c, l)) {
            f.expect_shape(mixer(l, "q_proj.weight"), {c.heads * D, E}, "num_attention_heads·head_dim × hidden_size");
            f.expect_shape(mixer(l, "k_proj.weight"), {c.kv_heads * D, E}, "num_key_value_heads·head_dim × hidden_size");
            f.expect_shape(mixer(l, "v_proj.weight"), {c.kv_heads * D, E}, "num_key_value_heads·head_dim × hidden_size");
            f.expect_shape(mixer(l, "o_proj.weight"), {E, c.heads * D}, "hidden_size × num_attention_heads·head_dim");
            if (!g.attention_bias) refuse_bias(f, mixer(l, "q_proj.bias"), "attention_bias");
        } else if (c.mixer_types[l] == "mamba") {
            f.expect_shape(mixer(l, "in_proj.weight"), {I + Cd + Hm, E}, in_proj_rows);
            f.expect_shape(mixer(l, "conv1d.weight"), {Cd, 1, g.conv_taps},
                           "mamba_num_heads·mamba_head_dim + 2·n_groups·ssm_state_size × 1 × conv_kernel");
            if (g.conv_bias) f.expect_shape(mixer(l, "conv1d.bias"), {Cd}, "use_conv_bias: the conv1d's channels");
            else refuse_bias(f, mixer(l, "conv1d.bias"), "use_conv_bias");
            for (const char* p : {"dt_bias", "A_log", "D"}) f.expect_shape(mixer(l, p), {Hm}, "mamba_num_heads");
            f.expect_shape(mixer(l, "norm.weight"), {I}, "mamba_num_heads·mamba_head_dim");
            f.expect_shape(mixer(l, "out_proj.weight"), {E, I}, "hidden_size × mamba_num_heads·mamba_head_dim");
            if (g.proj_bias) f.expect_shape(mixer(l, "in_proj.bias"), {I + Cd + Hm}, "use_bias: in_proj's rows");
            else refuse_bias(f, mixer(l, "in_proj.bias"), "use_bias");
        } else if (c.mixer_types[l] == "moe") {
            const std::size_t X = g.experts, Im = g.moe_intermediate, Is = g.shared_intermediate;
            f.expect_shape(mixer(l, "gate.weight"), {X, E}, "n_routed_experts × hidden_size");
            f.expect_shape(mixer(l, "gate.e_score_correction_bias"), {X}, "n_routed_experts");
            // The experts' width: moe_latent_size for a latent MoE, between its two projections.
            const std::size_t Ex = g.moe_latent ? g.moe_latent : E;
            const std::string width = g.moe_latent ? "moe_latent_size" : "hidden_size";
            if (g.moe_latent) {
                f.expect_shape(mixer(l, "fc1_latent_proj.weight"), {Ex, E}, "moe_latent_size × hidden_size");
                f.expect_shape(mixer(l, "fc2_latent_proj.weight"), {E, Ex}, "hidden_size × moe_latent_size");
                if (!c.mlp_bias) refuse_bias(f, mixer(l, "fc1_latent_proj.bias"), "mlp_bias");
            }
            if (f.maybe(mixer(l, "experts.up_proj"))) {
                f.expect_shape(mixer(l, "experts.up_proj"), {X, Im, Ex}, "n_routed_experts × moe_intermediate_size × " + width);
                f.expect_shape(mixer(l, "experts.down_proj"), {X, Ex, Im}, "n_routed_experts × " + width + " × moe_intermediate_size");
            } else {
                f.expect_shape(mixer(l, "experts.0.up_proj.weight"), {Im, Ex}, "moe_intermediate_size × " + width);
                f.expect_shape(mixer(l, "experts." + std::to_string(X - 1) + ".down_proj.weight"), {Ex, Im},
                               "n_routed_experts experts of " + width + " × moe_intermediate_size");
            }
            f.expect_shape(mixer(l, "shared_experts.up_proj.weight"), {Is, E}, "moe_shared_expert_intermediate_size × hidden_size");
            f.expect_shape(mixer(l, "shared_experts.down_proj.weight"), {E, Is}, "hidden_size × moe_shared_expert_intermediate_size");
            if (!c.mlp_bias) refuse_bias(f, mixer(l, "shared_experts.up_proj.bias"), "mlp_bias");
        } else {
            f.expect_shape(mixer(l, "up_proj.weight"), {c.intermediate, E}, "intermediate_size × hidden_size");
            f.expect_shape(mixer(l, "down_proj.weight"), {E, c.intermediate}, "hidden_size × intermediate_size");
            if (!c.mlp_bias) refuse_bias(f, mixer(l, "up_proj.bias"), "mlp_bias");
        }
    }
}

/// NemotronHAttention: q/k/v/o_proj (biases when attention_bias), causal, GQA, no RoPE.
layer_attention attention(const family& f, std::size_t layer) {
    const config& c = f.settings();
    layer_attention a = causal_rope_attention(c, layer);
    a.rope = false;
    a.nope = true;  // nothing comes between q_proj / k_proj and Q·Kᵀ
    a.rope_scaling = core::rope_scaling{};
    add_qkvo_weights(f, key(layer, "mixer."), c.qkv_bias, c.o_bias, a);
    return a;
}

/// The run's attention_mask as one value per (batch item, token), or empty when there is none
/// or every entry is 1 (NemotronHModel._update_mamba_mask: no mask then). Throws shape_error
/// when it is not (B, T) (or (T,) for one sequence).
std::vector<double> mamba_mask(const std::vector<named_array>& passed, std::size_t B, std::size_t T) {
    for (const named_array& p : passed) {
        if (p.name != "attention_mask") continue;
        const shape_t want2{B, T}, want1{T};
        if (p.value.shape != want2 && !(B == 1 && p.value.shape == want1))
            throw shape_error("attention_mask", "not one entry per token for the Mamba2 layers " +
                                                    expected_got(shape_string(want2), shape_string(p.value.shape)));
        std::vector<double> m = p.value.to_vector<double>();
        for (double v : m)
            if (v != 1.0) return m;
        return {};
    }
    return {};
}

double softplus(double v) { return v > 20.0 ? v : std::log1p(std::exp(v)); }  // torch's threshold 20

template <class T>
struct block {
    static core::tensor3<T> embed(const family& f, const array& ids) { return lookup<T>(f, embedding_name(f), ids); }

    /// The block's one norm (NemotronHBlock.norm), before its mixer.
    static core::tensor3<T> norm(const family& f, std::size_t layer, norm_site, const core::tensor3<T>& x) {
        return rms_norm(x, f.need(key(layer, "norm.weight")), f.settings().norm_eps);
    }

    /// NemotronHMLP of an "-" layer.
    static core::tensor3<T> mlp(const family& f, std::size_t layer, const core::tensor3<T>& n) { return dense(f, layer, n, ""); }

    /// NemotronHMLP: down_proj(act(up_proj(n))), non-gated (mlp_hidden_act, relu2 by default),
    /// its tensors under the layer's mixer + `stem` ("" for an "-" layer, "shared_experts."
    /// for a MoE layer's shared expert).
    static core::tensor3<T> dense(const family& f, std::size_t layer, const core::tensor3<T>& n, const std::string& stem) {
        const config& c = f.settings();
        const std::string up = mixer(layer, stem + "up_proj."), down = mixer(layer, stem + "down_proj.");
        core::tensor3<T> h = project(f, n, up + "weight", c.mlp_bias ? up + "bias" : "", core::weight_layout::out_in);
        activate(h, c.act);
        return project(f, h, down + "weight", c.mlp_bias ? down + "bias" : "", core::weight_layout::out_in);
    }

    /// NemotronHMoE.forward, n (B, T, E) → (B, T, E): the routed experts through
    /// model::sparse_moe (sigmoid_grouped routing with e_score_correction_bias, −∞ for the
    /// groups not kept, relu2 experts), read per expert as the Hub stores them
    /// (experts.N.up_proj.weight (I, E), experts.N.down_proj.weight (E, I)) or fused as
    /// NemotronHExperts holds them (experts.up_proj (X, I, E), experts.down_proj (X, E, I)),
    /// plus the shared expert (dense with stem "shared_experts.").
    static core::tensor3<T> moe(const family& f, std::size_t layer, const core::tensor3<T>& n) {
        const config& c = f.settings();
        const nemotron_h_fields& g = c.fields<nemotron_h_fields>();
        moe_weights<T> w;
        const std::string router = mixer(layer, "gate.weight"), bias = mixer(layer, "gate.e_score_correction_bias");
        w.router = matrix_of<T>(f.need(router), f.name(router));
        w.router_correction_bias = vector_of<T>(f.need(bias), f.name(bias));
        const std::string fused_up = mixer(layer, "experts.up_proj"), fused_down = mixer(layer, "experts.down_proj");
        if (const auto up = f.maybe(fused_up)) {
            w.up = tensor3_of<T>(*up, f.name(fused_up));
            w.down = tensor3_of<T>(f.need(fused_down), f.name(fused_down));
        } else {
            const std::size_t X = g.experts;
            for (const char* which : {"up_proj", "down_proj"}) {
                core::tensor3<T>& out = which[0] == 'u' ? w.up : w.down;
                for (std::size_t e = 0; e < X; ++e) {
                    const std::string name = mixer(layer, "experts." + std::to_string(e) + "." + which + ".weight");
                    const core::tensor2<T> m = matrix_of<T>(f.need(name), f.name(name));
                    if (e == 0) out = core::tensor3<T>::from_shape({X, m.shape(0), m.shape(1)});
                    if (m.shape(0) != out.shape(1) || m.shape(1) != out.shape(2))
                        throw shape_error(f.name(name), "does not match expert 0's " + std::string(which) + " " +
                                                            expected_got(shape_string({out.shape(1), out.shape(2)}),
                                                                         shape_string({m.shape(0), m.shape(1)})));
                    std::copy(m.data(), m.data() + m.size(), out.data() + e * m.size());
                }
            }
        }
        if (g.moe_latent) {
            const std::string in = mixer(layer, "fc1_latent_proj.weight"), out = mixer(layer, "fc2_latent_proj.weight");
            w.latent_in = matrix_of<T>(f.need(in), f.name(in));
            w.latent_out = matrix_of<T>(f.need(out), f.name(out));
        }
        moe_settings s;
        s.top_k = g.top_k;
        s.routing = moe_routing::sigmoid_grouped;
        s.expert = moe_expert::relu2;
        s.renormalize = g.norm_topk_prob;
        s.groups = g.moe_groups;
        s.top_groups = g.topk_groups;
        s.scaling = g.routed_scaling;
        s.renormalize_epsilon = 1e-20;  // topk_weights.sum(...) + 1e-20
        s.dropped_group_rank = -std::numeric_limits<double>::infinity();  // masked_fill(~score_mask, -inf)
        core::tensor3<T> y = moe_forward(n, w, s);
        y += dense(f, layer, n, "shared_experts.");
        return y;
    }

    /// NemotronHMamba2Mixer without a cache, n (B, T, E) → (B, T, E); see the file comment.
    static core::tensor3<T> mamba(const family& f, std::size_t layer, core::tensor3<T> n, const std::vector<named_array>& passed) {
        const config& c = f.settings();
        const nemotron_h_fields& g = c.fields<nemotron_h_fields>();
        const std::size_t B = n.shape(0), Tn = n.shape(1), I = g.inner(), Cd = g.conv_dim(), Hm = g.mamba_heads;
        const std::size_t P = g.mamba_head_dim, G = g.groups, N = g.state, K = g.conv_taps, W = I + Cd + Hm;
        const std::vector<double> mask = mamba_mask(passed, B, Tn);
        if (!mask.empty())  // input_states * attention_mask[:, :, None]
            for (std::size_t i = 0; i < B * Tn; ++i)
                for (std::size_t e = 0; e < c.hidden; ++e)
                    n.data()[i * c.hidden + e] = static_cast<T>(static_cast<double>(n.data()[i * c.hidden + e]) * mask[i]);
        const std::string in = mixer(layer, "in_proj."), out = mixer(layer, "out_proj.");
        const core::tensor3<T> proj = project(f, n, in + "weight", g.proj_bias ? in + "bias" : "", core::weight_layout::out_in);
        const std::vector<double> w = f.need(mixer(layer, "conv1d.weight")).to_vector<double>();  // (Cd, 1, K)
        std::vector<double> cb(Cd, 0.0);
        if (g.conv_bias) cb = f.need(mixer(layer, "conv1d.bias")).to_vector<double>();
        const std::vector<double> dt_bias = f.need(mixer(layer, "dt_bias")).to_vector<double>();
        const std::vector<double> a_log = f.need(mixer(layer, "A_log")).to_vector<double>();
        const std::vector<double> d_skip = f.need(mixer(layer, "D")).to_vector<double>();
        const std::vector<double> nw = f.need(mixer(layer, "norm.weight")).to_vector<double>();
        const auto at = [&](std::size_t bi, std::size_t t, std::size_t j) {
            return static_cast<double>(proj.data()[(bi * Tn + t) * W + j]);
        };
        // xBC: conv1d(xBC)[..., :T] with padding K − 1 (tap j of output t reads input t − K + 1 + j),
        // then the activation, then (padding) the mask; rounded to T as torch's tensor is.
        std::vector<double> xbc(B * Tn * Cd);
        for (std::size_t bi = 0; bi < B; ++bi)
            for (std::size_t t = 0; t < Tn; ++t)
                for (std::size_t ch = 0; ch < Cd; ++ch) {
                    double s = cb[ch];
                    for (std::size_t j = 0; j < K; ++j)
                        if (t + j + 1 >= K) s += w[ch * K + j] * at(bi, t + j + 1 - K, I + ch);
                    double v = static_cast<double>(static_cast<T>(activation_value(static_cast<double>(static_cast<T>(s)), g.mamba_act)));
                    if (!mask.empty()) v *= mask[bi * Tn + t];
                    xbc[(bi * Tn + t) * Cd + ch] = v;
                }
        // The scan per batch item and head, in double: dt, the decay exp(dt·A), the state (P, N);
        // each (item, head) on one of the run's threads (attn/threads.hpp), the same arithmetic
        // whichever runs it.
        std::vector<double> y(B * Tn * I);
        const std::size_t per_group = Hm / G;
        const int threads = std::max(1, std::min<int>(thread_budget(), static_cast<int>(B * Hm)));
        std::vector<double> states(static_cast<std::size_t>(threads) * P * N);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (long long job = 0; job < static_cast<long long>(B * Hm); ++job) {
            const std::size_t bi = static_cast<std::size_t>(job) / Hm, h = static_cast<std::size_t>(job) % Hm;
            double* const S = states.data() + static_cast<std::size_t>(omp_get_thread_num()) * P * N;
            const double A = -std::exp(a_log[h]);
            const std::size_t grp = h / per_group;
            std::fill(S, S + P * N, 0.0);
            for (std::size_t t = 0; t < Tn; ++t) {
                double dt = softplus(at(bi, t, I + Cd + h) + dt_bias[h]);
                dt = std::min(std::max(dt, g.dt_low), g.dt_high);  // torch.clamp(dt, *time_step_limit)
                const double decay = std::exp(dt * A);
                const double* row = xbc.data() + (bi * Tn + t) * Cd;
                const double* x = row + h * P;
                const double* Bv = row + I + grp * N;
                const double* Cv = row + I + G * N + grp * N;
                for (std::size_t p = 0; p < P; ++p) {
                    double acc = 0.0;
                    for (std::size_t s = 0; s < N; ++s) {
                        double& st = S[p * N + s];
                        st = decay * st + dt * x[p] * Bv[s];
                        acc += st * Cv[s];
                    }
                    y[(bi * Tn + t) * I + h * P + p] = acc + d_skip[h] * x[p];
                }
            }
        }
        // Zamba2RMSNormGated: (y · silu(z)) normalised per group of I / G values, times the weight.
        const std::size_t gs = I / G;
        core::tensor3<T> gated = core::tensor3<T>::from_shape({B, Tn, I});
        std::vector<double> v(gs);
        for (std::size_t i = 0; i < B * Tn; ++i)
            for (std::size_t q = 0; q < G; ++q) {
                double ms = 0.0;
                for (std::size_t e = 0; e < gs; ++e) {
                    const std::size_t col = q * gs + e;
                    const double z = at(i / Tn, i % Tn, col);
                    v[e] = y[i * I + col] * (z / (1.0 + std::exp(-z)));
                    ms += v[e] * v[e];
                }
                const double inv = 1.0 / std::sqrt(ms / static_cast<double>(gs) + c.norm_eps);
                for (std::size_t e = 0; e < gs; ++e) gated.data()[i * I + q * gs + e] = static_cast<T>(nw[q * gs + e] * (v[e] * inv));
            }
        return project(f, gated, out + "weight", g.proj_bias ? out + "bias" : "", core::weight_layout::out_in);
    }

    /// A Mamba2, MLP or MoE block, NemotronHBlock.forward: x + mixer(norm(x)) (the MLP and
    /// MoE mixers see no mask).
    static core::tensor3<T> other_block(const family& f, std::size_t layer, const core::tensor3<T>& x,
                                        const std::vector<named_array>& passed) {
        core::tensor3<T> n = norm(f, layer, norm_site::attention, x);
        const std::string& type = f.settings().mixer_types[layer];
        core::tensor3<T> o = type == "mamba" ? mamba(f, layer, std::move(n), passed) : type == "moe" ? moe(f, layer, n) : mlp(f, layer, n);
        o += x;
        return o;
    }
};

}  // namespace

const family_spec& nemotron_h_family() {
    static const family_spec spec = [] {
        family_spec s;
        s.name = "nemotron_h";
        s.order = 61;  // the hybrids after the MLA families (50-51), after lfm2
        s.model_types = {"nemotron_h"};
        s.architectures = {"NemotronHForCausalLM"};
        s.prefixes = {"backbone.", "model.", ""};  // the Hub's names, and transformers' after its renaming
        s.probe = "embeddings.weight";
        s.embedding_tensors = {"embeddings.weight", "embedding.weight"};
        s.dtype_probe = "layers.0.norm.weight";  // layer 0 may be any mixer
        s.reads_head_dim = true;                  // NemotronHAttention: config.head_dim
        s.default_head_dim = 128;                 // NemotronHConfig.head_dim
        s.structure = block_structure::mixer_only;
        set_family_hooks<block>(s, read_config, from_tensors, check, attention);
        return s;
    }();
    return spec;
}

}  // namespace attn::model
