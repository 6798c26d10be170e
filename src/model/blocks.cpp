/// \file blocks.cpp
/// Gemma's RMSNorm and the gated MLPs (include/attn/model/blocks.hpp), transcribed from
/// transformers' GemmaRMSNorm, GemmaMLP, LlamaMLP, Phi3MLP and GPTNeoXMLP.

#include "attn/model/blocks.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "attn/error.hpp"

namespace attn::model {

double activation_value(double v, activation a) {
    switch (a) {
        case activation::silu: return v / (1.0 + std::exp(-v));
        case activation::gelu_tanh: {
            const double c = std::sqrt(2.0 / M_PI);
            return 0.5 * v * (1.0 + std::tanh(c * (v + 0.044715 * v * v * v)));
        }
        case activation::gelu: return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
        case activation::relu: return v > 0 ? v : 0.0;
        case activation::relu2: return v > 0 ? v * v : 0.0;
    }
    return v;
}

namespace {

void expect_matrix(const array& w, std::size_t rows, std::size_t cols, const char* source, const char* what) {
    if (w.shape != shape_t{rows, cols})
        throw shape_error(source, std::string(what) + " does not fit " + expected_got(shape_string({rows, cols}), shape_string(w.shape)));
}

// down(act(g) · u) for every row of x, given the weights as doubles: gate rows at
// wg + i·H, up rows at wu + i·H, down (H, I).
template <class T>
core::tensor3<T> gated(const core::tensor3<T>& x, const std::vector<double>& wg, const std::vector<double>& wu,
                       const std::vector<double>& wd, std::size_t I, activation act) {
    const std::size_t H = x.shape(2), rows = x.shape(0) * x.shape(1);
    core::tensor3<T> y = core::tensor3<T>::from_shape({x.shape(0), x.shape(1), H});
    std::vector<T> h(I);
    for (std::size_t r = 0; r < rows; ++r) {
        const T* in = x.data() + r * H;
        for (std::size_t i = 0; i < I; ++i) {
            double g = 0, u = 0;
            for (std::size_t e = 0; e < H; ++e) {
                g += wg[i * H + e] * in[e];
                u += wu[i * H + e] * in[e];
            }
            h[i] = static_cast<T>(static_cast<T>(activation_value(static_cast<T>(g), act)) * static_cast<T>(u));
        }
        for (std::size_t o = 0; o < H; ++o) {
            double s = 0;
            for (std::size_t i = 0; i < I; ++i) s += wd[o * I + i] * h[i];
            y.data()[r * H + o] = static_cast<T>(s);
        }
    }
    return y;
}

}  // namespace

template <class T>
core::tensor3<T> gemma_rms_norm(const core::tensor3<T>& x, const array& w, double eps) {
    const std::size_t E = x.shape(2), rows = x.size() / (E ? E : 1);
    const std::vector<float> g = w.to_vector<float>();
    if (g.size() != E)
        throw shape_error("gemma_rms_norm", "weight does not fit the width " + expected_got(shape_string({E}), shape_string(w.shape)));
    core::tensor3<T> y = core::tensor3<T>::from_shape({x.shape(0), x.shape(1), E});
    const float feps = static_cast<float>(eps);
    for (std::size_t r = 0; r < rows; ++r) {
        const T* in = x.data() + r * E;
        double ms = 0;
        for (std::size_t e = 0; e < E; ++e) {
            const float v = static_cast<float>(in[e]);
            ms += static_cast<double>(v * v);  // x.float().pow(2): each square in float32
        }
        const float inv = 1.0f / std::sqrt(static_cast<float>(ms / static_cast<double>(E)) + feps);
        for (std::size_t e = 0; e < E; ++e)
            y.data()[r * E + e] = static_cast<T>((static_cast<float>(in[e]) * inv) * (1.0f + g[e]));
    }
    return y;
}

template <class T>
core::tensor3<T> gated_mlp(const core::tensor3<T>& x, const array& gate, const array& up, const array& down,
                           activation act) {
    const std::size_t H = x.shape(2);
    if (gate.rank() != 2) throw shape_error("gated_mlp", "gate_proj must be (I, hidden), got " + shape_string(gate.shape));
    const std::size_t I = gate.shape[0];
    expect_matrix(gate, I, H, "gated_mlp", "gate_proj (I, hidden)");
    expect_matrix(up, I, H, "gated_mlp", "up_proj (I, hidden)");
    expect_matrix(down, H, I, "gated_mlp", "down_proj (hidden, I)");
    return gated(x, gate.to_vector<double>(), up.to_vector<double>(), down.to_vector<double>(), I, act);
}

template <class T>
core::tensor3<T> fused_gated_mlp(const core::tensor3<T>& x, const array& gate_up, const array& down, activation act) {
    const std::size_t H = x.shape(2);
    if (gate_up.rank() != 2 || gate_up.shape[0] % 2 != 0)
        throw shape_error("fused_gated_mlp", "gate_up_proj must be (2I, hidden), gate rows then up rows " +
                                                 expected_got("(2I, " + std::to_string(H) + ")", shape_string(gate_up.shape)));
    const std::size_t I = gate_up.shape[0] / 2;
    expect_matrix(gate_up, 2 * I, H, "fused_gated_mlp", "gate_up_proj (2I, hidden)");
    expect_matrix(down, H, I, "fused_gated_mlp", "down_proj (hidden, I)");
    const std::vector<double> all = gate_up.to_vector<double>();
    const std::vector<double> wg(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(I * H));
    const std::vector<double> wu(all.begin() + static_cast<std::ptrdiff_t>(I * H), all.end());
    return gated(x, wg, wu, down.to_vector<double>(), I, act);
}

template <class T>
core::tensor3<T> biased_mlp(const core::tensor3<T>& x, const array& w_in, const array& b_in, const array& w_out,
                            const array& b_out, activation act) {
    const std::size_t H = x.shape(2), rows = x.shape(0) * x.shape(1);
    if (w_in.rank() != 2) throw shape_error("mlp", "the input projection must be (I, hidden), got " + shape_string(w_in.shape));
    const std::size_t I = w_in.shape[0];
    expect_matrix(w_in, I, H, "mlp", "input projection (I, hidden)");
    expect_matrix(w_out, H, I, "mlp", "output projection (hidden, I)");
    if (b_in.shape != shape_t{I}) throw shape_error("mlp", "input bias does not fit " + expected_got(shape_string({I}), shape_string(b_in.shape)));
    if (b_out.shape != shape_t{H})
        throw shape_error("mlp", "output bias does not fit " + expected_got(shape_string({H}), shape_string(b_out.shape)));
    const std::vector<double> wi = w_in.to_vector<double>(), bi = b_in.to_vector<double>(), wo = w_out.to_vector<double>(),
                              bo = b_out.to_vector<double>();
    core::tensor3<T> y = core::tensor3<T>::from_shape({x.shape(0), x.shape(1), H});
    std::vector<T> h(I);
    for (std::size_t r = 0; r < rows; ++r) {
        const T* in = x.data() + r * H;
        for (std::size_t i = 0; i < I; ++i) {
            double s = 0;
            for (std::size_t e = 0; e < H; ++e) s += wi[i * H + e] * in[e];
            h[i] = static_cast<T>(activation_value(static_cast<T>(static_cast<T>(s) + static_cast<T>(bi[i])), act));
        }
        for (std::size_t o = 0; o < H; ++o) {
            double s = 0;
            for (std::size_t i = 0; i < I; ++i) s += wo[o * I + i] * h[i];
            y.data()[r * H + o] = static_cast<T>(static_cast<T>(s) + static_cast<T>(bo[o]));
        }
    }
    return y;
}

#define ATTN_INSTANTIATE(T)                                                                                              \
    template core::tensor3<T> gemma_rms_norm<T>(const core::tensor3<T>&, const array&, double);                         \
    template core::tensor3<T> gated_mlp<T>(const core::tensor3<T>&, const array&, const array&, const array&, activation); \
    template core::tensor3<T> fused_gated_mlp<T>(const core::tensor3<T>&, const array&, const array&, activation); \
    template core::tensor3<T> biased_mlp<T>(const core::tensor3<T>&, const array&, const array&, const array&, const array&, \
                                            activation);
ATTN_INSTANTIATE(float)
ATTN_INSTANTIATE(double)
#undef ATTN_INSTANTIATE

}  // namespace attn::model
