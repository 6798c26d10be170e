/// \file moe.cpp
/// Sparse MoE blocks (include/attn/model/moe.hpp), transcribed from transformers'
/// MixtralSparseMoeBlock, Qwen2MoeSparseMoeBlock, Qwen3MoeSparseMoeBlock, GptOssMLP, Llama4TextMoe,
/// DeepseekV3MoE and NemotronHMoE.

#include "attn/model/moe.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "attn/core/activation.hpp"
#include "attn/core/projection.hpp"
#include "attn/error.hpp"
#include "attn/model/blocks.hpp"
#include "attn/tensor.hpp"

namespace attn::model {

namespace {

template <class C>
std::string dims_of(const C& t) {
    return shape_string(shape_t(t.shape().begin(), t.shape().end()));
}

template <class C>
void expect(const C& t, std::initializer_list<std::size_t> want, const char* what) {
    const shape_t w(want);
    if (shape_t(t.shape().begin(), t.shape().end()) != w)
        throw shape_error("moe", std::string(what) + " does not fit " + expected_got(shape_string(w), dims_of(t)));
}

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// Σ_i a[i]·b[i] over n, accumulated in double.
template <class T>
double dot(const T* a, const T* b, std::size_t n) {
    double s = 0;
    for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
    return s;
}

// Rows of an expert's input, computed one GEMM per weight over the n rows routed to it.
// down(silu(gate x) · up x) with nn.Linear (out, in) weights gate/up (I, H), down (H, I) on
// x (n, H): out (n, H), each product rounded to T as torch's float32 ops round them.
template <class T>
void swiglu_rows(const T* x, std::size_t n, const T* gate, const T* up, const T* down, std::size_t H, std::size_t I,
                 std::vector<T>& g, std::vector<T>& u, T* out) {
    g.resize(n * I);
    u.resize(n * I);
    core::linear_rows(x, n, H, gate, I, core::weight_layout::out_in, g.data());
    core::linear_rows(x, n, H, up, I, core::weight_layout::out_in, u.data());
    core::silu(g.data(), n * I);  // rounded once to T, as torch's silu
    for (std::size_t i = 0; i < n * I; ++i) g[i] = static_cast<T>(g[i] * u[i]);
    core::linear_rows(g.data(), n, I, down, H, core::weight_layout::out_in, out);
}

// down(relu(up x)²) with nn.Linear (out, in) weights up (I, H), down (H, I) on x (n, H):
// out (n, H) (NemotronHExperts with mlp_hidden_act relu2).
template <class T>
void relu2_rows(const T* x, std::size_t n, const T* up, const T* down, std::size_t H, std::size_t I, std::vector<T>& u, T* out) {
    u.resize(n * I);
    core::linear_rows(x, n, H, up, I, core::weight_layout::out_in, u.data());
    for (std::size_t i = 0; i < n * I; ++i) u[i] = static_cast<T>(activation_value(u[i], activation::relu2));
    core::linear_rows(u.data(), n, I, down, H, core::weight_layout::out_in, out);
}

}  // namespace

template <class T>
std::vector<std::int64_t> torch_topk_indices(const T* v, std::size_t n, std::size_t k) {
    if (k == 0 || k > n)
        throw value_error("top_k", "must be in [1, " + std::to_string(n) + "] " +
                                       expected_got("at most the number of values", std::to_string(k)));
    // aten/src/ATen/native/TopKImpl.h, topk_impl_loop (largest = true, sorted = true)
    using elem_t = std::pair<T, std::int64_t>;
    std::vector<elem_t> queue(n);
    for (std::size_t j = 0; j < n; ++j) queue[j] = {v[j], static_cast<std::int64_t>(j)};
    const auto greater = [](const elem_t& x, const elem_t& y) -> bool {
        return (std::isnan(x.first) && !std::isnan(y.first)) || (x.first > y.first);
    };
    if (k * 64 <= n) {
        std::partial_sort(queue.begin(), queue.begin() + static_cast<std::ptrdiff_t>(k), queue.end(), greater);
    } else {
        std::nth_element(queue.begin(), queue.begin() + static_cast<std::ptrdiff_t>(k) - 1, queue.end(), greater);
        std::sort(queue.begin(), queue.begin() + static_cast<std::ptrdiff_t>(k) - 1, greater);
    }
    std::vector<std::int64_t> out(k);
    for (std::size_t j = 0; j < k; ++j) out[j] = queue[j].second;
    return out;
}

template <class T>
moe_result<T> sparse_moe(const core::tensor2<T>& x, const moe_weights<T>& w, const moe_settings& s) {
    const std::size_t N = x.shape(0), Hx = x.shape(1), E = w.router.shape(0), k = s.top_k;
    expect(w.router, {E, Hx}, "router weight (E, hidden)");
    // The experts' width H: the latent's for a latent MoE, else the hidden size.
    const bool latent = w.latent_in.size() != 0;
    const std::size_t H = latent ? w.latent_in.shape(0) : Hx;
    if (latent) {
        expect(w.latent_in, {H, Hx}, "latent_in (latent, hidden)");
        expect(w.latent_out, {Hx, H}, "latent_out (hidden, latent)");
    }
    if (w.router_bias.size() != 0) expect(w.router_bias, {E}, "router bias (E)");
    if (k == 0 || k > E)
        throw value_error("moe", "top_k must be in [1, E] " + expected_got("at most " + std::to_string(E), std::to_string(k)));
    std::size_t I = 0;
    if (s.expert == moe_expert::swiglu) {
        I = w.gate.shape(1);
        expect(w.gate, {E, I, H}, "expert gate (E, I, hidden)");
        expect(w.up, {E, I, H}, "expert up (E, I, hidden)");
        expect(w.down, {E, H, I}, "expert down (E, hidden, I)");
    } else if (s.expert == moe_expert::relu2) {
        I = w.up.shape(1);
        expect(w.up, {E, I, H}, "expert up (E, I, hidden)");
        expect(w.down, {E, H, I}, "expert down (E, hidden, I)");
    } else {
        if (w.gate_up.shape(2) % 2 != 0)
            throw shape_error("moe", "gate_up's last axis must be even (gate and up interleaved), got " + dims_of(w.gate_up));
        I = w.gate_up.shape(2) / 2;
        expect(w.gate_up, {E, H, 2 * I}, "expert gate_up (E, hidden, 2I)");
        expect(w.gate_up_bias, {E, 2 * I}, "expert gate_up bias (E, 2I)");
        expect(w.down, {E, I, H}, "expert down (E, I, hidden)");
        expect(w.down_bias, {E, H}, "expert down bias (E, hidden)");
    }
    const bool shared = w.shared_gate.size() != 0;
    std::size_t Is = 0;
    if (shared) {
        Is = w.shared_gate.shape(0);
        expect(w.shared_gate, {Is, Hx}, "shared expert gate (Is, hidden)");
        expect(w.shared_up, {Is, Hx}, "shared expert up (Is, hidden)");
        expect(w.shared_down, {Hx, Is}, "shared expert down (hidden, Is)");
        if (w.shared_expert_gate.size() != 0) expect(w.shared_expert_gate, {1, Hx}, "shared_expert_gate (1, hidden)");
    }
    const bool grouped = s.routing == moe_routing::sigmoid_grouped;
    if (grouped) {
        if (w.router_correction_bias.size() != 0) expect(w.router_correction_bias, {E}, "router correction bias (E)");
        if (s.groups == 0 || E % s.groups != 0 || E / s.groups < 2 || s.top_groups == 0 || s.top_groups > s.groups)
            throw value_error("moe", "n_group must divide the experts into groups of 2 or more, topk_group be in [1, n_group] " +
                                         expected_got("n_group dividing " + std::to_string(E) + ", topk_group ≤ n_group",
                                                      std::to_string(s.groups) + ", " + std::to_string(s.top_groups)));
    }

    moe_result<T> r;
    r.output = core::tensor2<T>::from_shape({N, Hx});
    r.router_logits = core::tensor2<T>::from_shape({N, E});
    r.routing_weights = core::tensor2<T>::from_shape({N, k});
    r.selected.resize(N * k);
    // The routing, token by token in double: which experts each token takes, and their weights.
    std::vector<double> logits(E);
    std::vector<T> ranked(E);
    std::vector<std::vector<std::size_t>> routed(E);  // per expert: t·k + j of the tokens routed to it
    for (std::size_t t = 0; t < N; ++t) {
        const T* xt = x.data() + t * Hx;
        for (std::size_t e = 0; e < E; ++e) {
            logits[e] = dot(xt, w.router.data() + e * Hx, Hx) + (w.router_bias.size() ? static_cast<double>(w.router_bias(e)) : 0.0);
            r.router_logits(t, e) = static_cast<T>(logits[e]);
        }
        // what torch.topk ranks: the probabilities (softmax first) or the logits, in T
        std::vector<double> prob(E);
        if (s.routing == moe_routing::softmax_then_topk) {
            const double m = *std::max_element(logits.begin(), logits.end());
            double z = 0;
            for (std::size_t e = 0; e < E; ++e) z += prob[e] = std::exp(logits[e] - m);
            for (std::size_t e = 0; e < E; ++e) ranked[e] = static_cast<T>(prob[e] /= z);
        } else if (grouped) {
            // DeepseekV3TopkRouter.get_topk_indices: scores + bias for the choice, groups by
            // the sum of their top 2, the experts of the groups not kept ranked 0.
            const std::size_t G = s.groups, per = E / G;
            for (std::size_t e = 0; e < E; ++e) {
                prob[e] = static_cast<T>(sigmoid(logits[e]));
                ranked[e] = static_cast<T>(prob[e] + (w.router_correction_bias.size() ? static_cast<double>(w.router_correction_bias(e)) : 0.0));
            }
            std::vector<T> group_score(G);
            for (std::size_t g = 0; g < G; ++g) {
                const std::vector<std::int64_t> two = torch_topk_indices(ranked.data() + g * per, per, 2);
                group_score[g] = static_cast<T>(static_cast<double>(ranked[g * per + two[0]]) + ranked[g * per + two[1]]);
            }
            std::vector<bool> kept(G, false);
            for (std::int64_t g : torch_topk_indices(group_score.data(), G, s.top_groups)) kept[static_cast<std::size_t>(g)] = true;
            for (std::size_t e = 0; e < E; ++e)
                if (!kept[e / per]) ranked[e] = static_cast<T>(s.dropped_group_rank);
        } else {
            for (std::size_t e = 0; e < E; ++e) ranked[e] = r.router_logits(t, e);
        }
        const std::vector<std::int64_t> sel = torch_topk_indices(ranked.data(), E, k);
        std::vector<double> rw(k);
        if (grouped) {
            // DeepseekV3TopkRouter.forward: the chosen scores (without the bias), renormalised, scaled.
            double sum = 0;
            for (std::size_t j = 0; j < k; ++j) sum += rw[j] = prob[static_cast<std::size_t>(sel[j])];
            for (auto& v : rw) v = (s.renormalize ? v / (sum + s.renormalize_epsilon) : v) * s.scaling;
        } else if (s.routing == moe_routing::sigmoid_scaled_input) {
            // Llama4Router: sigmoid of the chosen logits (in T, as .float() then .to(dtype)).
            for (std::size_t j = 0; j < k; ++j) rw[j] = static_cast<T>(sigmoid(ranked[sel[j]]));
        } else if (s.routing == moe_routing::softmax_then_topk) {
            double sum = 0;
            for (std::size_t j = 0; j < k; ++j) sum += rw[j] = ranked[sel[j]];
            if (s.renormalize)
                for (auto& v : rw) v /= sum;
        } else {
            // softmax over the k chosen logits
            double m = -INFINITY, z = 0;
            for (std::size_t j = 0; j < k; ++j) m = std::max(m, static_cast<double>(ranked[sel[j]]));
            for (std::size_t j = 0; j < k; ++j) z += rw[j] = std::exp(ranked[sel[j]] - m);
            for (auto& v : rw) v /= z;
        }
        for (std::size_t j = 0; j < k; ++j) {
            r.selected[t * k + j] = sel[j];
            r.routing_weights(t, j) = static_cast<T>(rw[j]);
            routed[static_cast<std::size_t>(sel[j])].push_back(t * k + j);
        }
    }

    // The experts, each as DeepseekV3MoE.moe and the other experts' loops run them: one GEMM
    // per weight over the tokens routed to it, its output times the token's weight added
    // into a double accumulator (the experts in index order, then the shared expert).
    std::vector<T> xl;  // a latent MoE's expert input, x·latent_inᵀ (N, latent)
    if (latent) {
        xl.resize(N * H);
        core::linear_rows(x.data(), N, Hx, w.latent_in.data(), H, core::weight_layout::out_in, xl.data());
    }
    const T* xe = latent ? xl.data() : x.data();
    std::vector<double> acc(N * H, 0.0);
    std::vector<T> rows, a, b, out;
    for (std::size_t e = 0; e < E; ++e) {
        const std::vector<std::size_t>& picks = routed[e];
        const std::size_t n = picks.size();
        if (n == 0) continue;
        // Llama4TextMoe scales the expert's input by its weight (x · σ) and adds its output
        // unscaled; the others scale the output.
        const bool scales_input = s.expert == moe_expert::swiglu && s.routing == moe_routing::sigmoid_scaled_input;
        rows.resize(n * H);
        for (std::size_t r_ = 0; r_ < n; ++r_) {
            const T* xt = xe + (picks[r_] / k) * H;
            const T weight = r.routing_weights(picks[r_] / k, picks[r_] % k);
            for (std::size_t i = 0; i < H; ++i) rows[r_ * H + i] = scales_input ? static_cast<T>(xt[i] * weight) : xt[i];
        }
        out.resize(n * H);
        if (s.expert == moe_expert::swiglu) {
            swiglu_rows(rows.data(), n, w.gate.data() + e * I * H, w.up.data() + e * I * H, w.down.data() + e * H * I, H, I, a, b,
                        out.data());
        } else if (s.expert == moe_expert::relu2) {
            relu2_rows(rows.data(), n, w.up.data() + e * I * H, w.down.data() + e * H * I, H, I, a, out.data());
        } else {
            // GptOssExperts.forward: gate_up (in, out) with gate at even, up at odd columns
            a.resize(n * 2 * I);
            core::linear_rows(rows.data(), n, H, w.gate_up.data() + e * H * 2 * I, 2 * I, core::weight_layout::in_out, a.data());
            b.resize(n * I);
            for (std::size_t r_ = 0; r_ < n; ++r_)
                for (std::size_t i = 0; i < I; ++i) {
                    const double gate = std::min(static_cast<double>(static_cast<T>(a[r_ * 2 * I + 2 * i] + w.gate_up_bias(e, 2 * i))), s.limit);
                    const double up = std::clamp(static_cast<double>(static_cast<T>(a[r_ * 2 * I + 2 * i + 1] + w.gate_up_bias(e, 2 * i + 1))),
                                                 -s.limit, s.limit);
                    const double glu = static_cast<T>(gate * static_cast<T>(sigmoid(static_cast<T>(gate * s.alpha))));
                    b[r_ * I + i] = static_cast<T>(static_cast<T>(up + 1.0) * glu);
                }
            core::linear_rows(b.data(), n, I, w.down.data() + e * I * H, H, core::weight_layout::in_out, out.data());
            for (std::size_t r_ = 0; r_ < n; ++r_)
                for (std::size_t o = 0; o < H; ++o) out[r_ * H + o] = static_cast<T>(out[r_ * H + o] + w.down_bias(e, o));
        }
        for (std::size_t r_ = 0; r_ < n; ++r_) {
            const std::size_t t = picks[r_] / k;
            const double weight = scales_input ? 1.0 : static_cast<double>(r.routing_weights(t, picks[r_] % k));
            for (std::size_t o = 0; o < H; ++o) acc[t * H + o] += weight * out[r_ * H + o];
        }
    }
    if (latent) {
        // fc2_latent_proj of the routed sum, rounded to T as the experts' output is.
        rows.resize(N * H);
        for (std::size_t i = 0; i < N * H; ++i) rows[i] = static_cast<T>(acc[i]);
        out.resize(N * Hx);
        core::linear_rows(rows.data(), N, H, w.latent_out.data(), Hx, core::weight_layout::out_in, out.data());
        acc.assign(out.begin(), out.end());
    }
    if (shared) {
        out.resize(N * Hx);
        swiglu_rows(x.data(), N, w.shared_gate.data(), w.shared_up.data(), w.shared_down.data(), Hx, Is, a, b, out.data());
        for (std::size_t t = 0; t < N; ++t) {
            const T* xt = x.data() + t * Hx;
            const double gate = w.shared_expert_gate.size() ? static_cast<double>(static_cast<T>(sigmoid(dot(xt, w.shared_expert_gate.data(), Hx)))) : 1.0;
            for (std::size_t o = 0; o < Hx; ++o) acc[t * Hx + o] += gate * out[t * Hx + o];
        }
    }
    for (std::size_t t = 0; t < N; ++t)
        for (std::size_t o = 0; o < Hx; ++o) r.output(t, o) = static_cast<T>(acc[t * Hx + o]);
    return r;
}

#define ATTN_INSTANTIATE(T)                                                                                   \
    template std::vector<std::int64_t> torch_topk_indices<T>(const T*, std::size_t, std::size_t);           \
    template moe_result<T> sparse_moe<T>(const core::tensor2<T>&, const moe_weights<T>&, const moe_settings&);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

}  // namespace attn::model
