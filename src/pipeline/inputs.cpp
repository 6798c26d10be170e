// Inputs → Q, K, V (src/pipeline/inputs.hpp).
#include "inputs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "attn/core/posenc.hpp"
#include "attn/core/projection.hpp"
#include "attn/stages.hpp"

namespace attn::pipeline {

namespace {

/// Adds the sinusoidal encodings of positions first, first + 1, … to x (B, T, E) along
/// the sequence axis, in double, rounding once to T (as X + PE in NumPy would).
template <class T>
void add_posenc(tensor3<T>& x, const pipeline_options& o, std::size_t first, const char* name) {
    const std::size_t B = x.shape(0), Tn = x.shape(1), E = x.shape(2);
    if (E % 2 != 0)
        throw shape_error(name, "--posenc needs an even embedding width " + expected_got("an even E", num(E)));
    const std::vector<double> pe = positional_encoding(Tn, E, *o.posenc, o.posenc_base, first);
    for (std::size_t b = 0; b < B; ++b) {
        T* row = x.data() + b * Tn * E;
        for (std::size_t i = 0; i < Tn * E; ++i) row[i] = static_cast<T>(static_cast<double>(row[i]) + pe[i]);
    }
}


}  // namespace

rope_tables rope_tables_for(const input_set& in, const pipeline_options& o, std::size_t B, std::size_t T, std::size_t D,
                            std::size_t first) {
    const std::size_t R = o.attention.rotary_dim ? o.attention.rotary_dim : D;
    if (R > D)
        throw usage_error("--rotary-dim", "larger than the head width " + expected_got("≤ " + num(D), num(R)));
    std::vector<std::int64_t> positions(B * T);
    const array* ids = in.find("position_ids");
    if (ids) {
        const bool fits = (ids->rank() == 2 && ids->shape[0] == B && ids->shape[1] == T) || (ids->rank() == 1 && ids->shape[0] == T);
        if (!fits || !is_integer(ids->type))
            throw shape_error("position_ids", "one integer position per token " +
                                                  expected_got(shape_string({B, T}) + " or " + shape_string({T}) + " integers",
                                                               shape_string(ids->shape) + " " + std::string(dtype_name(ids->type))));
        std::vector<std::int64_t> given;
        try {
            given = ids->to_vector<std::int64_t>();
        } catch (const value_error& e) {  // a uint64 beyond 2^63 − 1: named as the array it is
            const std::string what = e.what();
            throw value_error("position_ids", what.substr(what.find(": ") + 2));
        }
        for (std::size_t n = 0; n < given.size(); ++n)
            if (given[n] < 0)
                throw value_error("position_ids", "negative position at index " + num(n) + " " +
                                                      expected_got("positions ≥ 0", std::to_string(given[n])));
        for (std::size_t b = 0; b < B; ++b)
            std::copy_n(given.data() + (ids->rank() == 2 ? b * T : 0), T, positions.data() + b * T);
    } else {
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t t = 0; t < T; ++t) positions[b * T + t] = static_cast<std::int64_t>(first + t);
    }
    const array* cos = in.find("rope_cos");
    const array* sin = in.find("rope_sin");
    if ((cos != nullptr) != (sin != nullptr))
        throw value_error("inputs", "rope_cos and rope_sin come together " + expected_got("both", cos ? "rope_cos only" : "rope_sin only"));
    if (!cos) return rope_from_theta(positions, B, T, R, o.attention.rope_theta);
    if (cos->shape != sin->shape)
        throw shape_error("rope_sin", "shape differs from rope_cos's " + expected_got(shape_string(cos->shape), shape_string(sin->shape)));
    // (M, R/2) tables are indexed by position (given or default); (B, T, R/2) are per token.
    return rope_from_caches(cos->to_vector<double>(), sin->to_vector<double>(), cos->shape,
                            cos->rank() == 2 ? &positions : nullptr, B, T, R);
}

namespace {

/// Whether a run may read q, k and v in place (prepared::in_place): nothing rotates,
/// scales or prepends to them (no --rope, query temperature or KV cache), the reference
/// kernel (which reads tensors) is not asked for, and no stage shows them (q, k, v,
/// present_key, present_value, stats, x).
bool reads_inputs_in_place(const input_set& in, const pipeline_options& o) {
    if (o.attention.rope || o.q_temperature.beta != 0 || o.kernel == kernel_kind::reference || o.posenc) return false;
    if (in.find("past_key") || in.find("past_value")) return false;
    for (const stage s : {stage::q, stage::k, stage::v, stage::present_key, stage::present_value, stage::stats, stage::x})
        if (std::find(o.dump.begin(), o.dump.end(), stage_name(s)) != o.dump.end()) return false;
    return true;
}

/// `a` as the kernel's (B, H, T, D) view of its own bytes, when it is in the compute dtype
/// and aligned for it; nullopt otherwise (it is then converted, as before).
template <class T>
std::optional<tensor4_view<T>> in_place_view(const array& a, std::array<std::size_t, 4> shape) {
    const std::byte* bytes = std::as_const(a.data).data();
    if (a.type != dtype_of<T>() || reinterpret_cast<std::uintptr_t>(bytes) % alignof(T) != 0) return std::nullopt;
    return tensor4_view<T>(reinterpret_cast<const T*>(bytes), shape);
}

/// in_place_view of q, k and v, all three or none.
template <class T>
std::optional<std::array<tensor4_view<T>, 3>> in_place_views(const std::array<const array*, 3>& arrays,
                                                            const std::array<std::array<std::size_t, 4>, 3>& shapes) {
    std::array<tensor4_view<T>, 3> views;
    for (std::size_t i = 0; i < 3; ++i) {
        const auto v = in_place_view<T>(*arrays[i], shapes[i]);
        if (!v) return std::nullopt;
        views[i] = *v;
    }
    return views;
}

/// (B, H, T, D) of a rank-4 array, or (B, 1, T, D) of one head's (T, D) or (B, T, D).
std::array<std::size_t, 4> as_heads_shape(const array& a) {
    if (a.rank() == 4) return {a.shape[0], a.shape[1], a.shape[2], a.shape[3]};
    return {a.rank() == 3 ? a.shape[0] : 1, 1, a.shape[a.rank() - 2], a.shape[a.rank() - 1]};
}

}  // namespace

template <class T>
prepared<T> prepare_qkv(input_set& in, const pipeline_options& o) {
    prepared<T> p;
    const bool may_read_in_place = reads_inputs_in_place(in, o);
    const bool keep_x = std::find(o.dump.begin(), o.dump.end(), "x") != o.dump.end();
    const array* qa = in.find("q");
    const array* xa = in.find("x");
    if (qa) {
        if (o.posenc)
            throw usage_error("--posenc", "adds to embeddings X, not to q, k, v " + expected_got("x", "q, k, v"));
        const array* ka = in.find("k");
        const array* va = in.find("v");
        if (!ka || !va)
            throw value_error("inputs", std::string("q needs k and v ") + expected_got("q, k, v", ka ? "q, k" : va ? "q, v" : "q"));
        for (auto [a, n] : {std::pair{qa, "q"}, {ka, "k"}, {va, "v"}}) {
            check_float(*a, n);
            check_nonempty(a->shape, n);
            if (a->rank() != qa->rank())
                throw shape_error(n, "rank differs from q's " + expected_got(rank_text(qa->rank()), rank_text(a->rank())));
        }
        p.rank = qa->rank();
        if (p.rank < 2 || p.rank > 4)
            throw shape_error("q", "wrong rank " + expected_got("(T, D), (B, T, D) or (B, H, T, D)", shape_string(qa->shape)));
        if (p.rank == 4) {  // the heads are q's and k's second axis
            if (o.heads && o.heads != qa->shape[1])
                throw usage_error("--heads", "differs from q's head axis " + expected_got(num(qa->shape[1]), num(o.heads)));
            if (o.kv_heads && o.kv_heads != ka->shape[1])
                throw usage_error("--kv-heads", "differs from k's head axis " + expected_got(num(ka->shape[1]), num(o.kv_heads)));
        }
        const std::size_t hq = o.heads ? o.heads : 1, hkv = o.kv_heads ? o.kv_heads : hq;
        if (may_read_in_place && (p.rank == 4 || (hq == 1 && hkv == 1))) {
            p.in_place = in_place_views<T>({qa, ka, va}, {as_heads_shape(*qa), as_heads_shape(*ka), as_heads_shape(*va)});
            if (p.in_place) return p;
        }
        if (p.rank == 4) {
            // Each input's data is freed once converted (docs/design.md §5.4): the arrays
            // and the tensors are never all held at once.
            p.q = as_rank4<T>(*qa, "q");
            in.release({"q"});
            p.k = as_rank4<T>(*ka, "k");
            in.release({"k"});
            p.v = as_rank4<T>(*va, "v");
            in.release({"v"});
            return p;
        }
        const char* kv_option = o.kv_heads ? "--kv-heads" : "--heads";
        p.q = as_heads<T>(*qa, hq, "--heads", "q");
        in.release({"q"});
        p.k = as_heads<T>(*ka, hkv, kv_option, "k");
        in.release({"k"});
        p.v = as_heads<T>(*va, hkv, kv_option, "v");
        in.release({"v"});
        return p;
    }
    if (!xa) throw value_error("inputs", "nothing to attend over " + expected_got("x, or q, k and v", "neither"));
    const array* xkv = in.find("x_kv");
    check_float(*xa, "x");
    check_nonempty(xa->shape, "x");
    p.rank = xa->rank();
    if (o.posenc && p.rank != 2 && p.rank != 3)
        throw shape_error("x", "--posenc needs X of rank 2 or 3 " + expected_got("(T, E) or (B, T, E)", shape_string(xa->shape)));
    const bool lone = !xkv && !in.find("w_q") && !in.find("in_proj_weight");
    if (lone && (p.rank < 2 || p.rank > 4))  // as_batched's message would leave out 4-D
        throw shape_error("x", "wrong rank " + expected_got("(T, D), (B, T, D) or (B, H, T, D)", shape_string(xa->shape)));
    if (p.rank == 4 && lone) {
        // A lone 4-D array is self-attention over (B, H, T, D): Q = K = V = X.
        if (o.heads && o.heads != xa->shape[1])
            throw usage_error("--heads", "differs from x's head axis " + expected_got(num(xa->shape[1]), num(o.heads)));
        if (may_read_in_place) {
            const std::array<std::size_t, 4> shape = as_heads_shape(*xa);
            p.in_place = in_place_views<T>({xa, xa, xa}, {shape, shape, shape});
            if (p.in_place) return p;
        }
        p.q = as_rank4<T>(*xa, "x");
        p.k = p.v = p.q;
        if (keep_x) p.x4 = p.q;
        return p;
    }
    tensor3<T> x = as_batched<T>(*xa, "x");
    if (o.posenc) {
        // With a KV cache (self-attention), the new tokens follow the cached ones.
        const array* pk = in.find("past_key");
        add_posenc(x, o, !xkv && pk && pk->rank() == 4 ? pk->shape[2] : 0, "x");
    }
    if (keep_x) p.x = x;
    tensor3<T> x_kv;
    if (xkv) {
        check_float(*xkv, "x_kv");
        check_nonempty(xkv->shape, "x_kv");
        if (xkv->rank() != xa->rank())
            throw shape_error("x_kv", "rank differs from x's " + expected_got(rank_text(xa->rank()), rank_text(xkv->rank())));
        x_kv = as_batched<T>(*xkv, "x_kv");
        if (o.posenc) add_posenc(x_kv, o, 0, "x_kv");
        if (x_kv.shape(0) != x.shape(0))
            throw shape_error("x_kv", "batch size differs from x's " + expected_got(num(x.shape(0)), num(x_kv.shape(0))));
    }
    const tensor3<T>& src_kv = xkv ? x_kv : x;

    std::optional<tensor2<T>> wq, wk, wv;
    std::optional<tensor1<T>> bq, bk, bv;
    if (const array* ipw = in.find("in_proj_weight")) {
        // nn.MultiheadAttention's packed (3E, E) weight and (3E) bias: q, k, v in that order.
        const tensor2<T> w = as_matrix<T>(*ipw, "in_proj_weight");
        if (w.shape(0) % 3 != 0)
            throw shape_error("in_proj_weight", "rows do not split in three " + expected_got("(3E, E)", shape_string({w.shape(0), w.shape(1)})));
        const std::size_t e = w.shape(0) / 3;
        for (std::size_t part = 0; part < 3; ++part) {
            tensor2<T> slice = tensor2<T>::from_shape({e, w.shape(1)});
            std::copy_n(w.data() + part * e * w.shape(1), e * w.shape(1), slice.data());
            (part == 0 ? wq : part == 1 ? wk : wv) = std::move(slice);
        }
        if (auto b = as_vector<T>(in.find("in_proj_bias"), "in_proj_bias")) {
            if (b->shape(0) != 3 * e)
                throw shape_error("in_proj_bias", "wrong length " + expected_got(shape_string({3 * e}), shape_string({b->shape(0)})));
            for (std::size_t part = 0; part < 3; ++part) {
                tensor1<T> slice = tensor1<T>::from_shape({e});
                std::copy_n(b->data() + part * e, e, slice.data());
                (part == 0 ? bq : part == 1 ? bk : bv) = std::move(slice);
            }
        }
        if (o.layout != weight_layout::out_in)
            throw usage_error("--weight-layout", "in_proj_weight is always (3E, E) " + expected_got("out-in", "in-out"));
    } else {
        const array* w[3] = {in.find("w_q"), in.find("w_k"), in.find("w_v")};
        const bool any = w[0] || w[1] || w[2];
        if (any && !(w[0] && w[1] && w[2]))
        {
            std::string got;
            for (int i = 0; i < 3; ++i)
                if (w[i]) got += std::string(got.empty() ? "" : ", ") + (i == 0 ? "w_q" : i == 1 ? "w_k" : "w_v");
            throw value_error("inputs", "projection weights come in threes " + expected_got("w_q, w_k, w_v", got));
        }
        if (any) {
            wq = as_matrix<T>(*w[0], "w_q");
            wk = as_matrix<T>(*w[1], "w_k");
            wv = as_matrix<T>(*w[2], "w_v");
            bq = as_vector<T>(in.find("b_q"), "b_q");
            bk = as_vector<T>(in.find("b_k"), "b_k");
            bv = as_vector<T>(in.find("b_v"), "b_v");
        }
    }
    // The arrays are converted: their data is no longer needed (docs/design.md §5.4).
    in.release({"x", "x_kv"});
    tensor3<T> q3, k3, v3;
    if (wq) {
        p.projected = true;
        const weight_layout layout = in.find("in_proj_weight") ? weight_layout::out_in : o.layout;
        q3 = linear(x, *wq, bq, layout, "w_q");
        k3 = linear(src_kv, *wk, bk, layout, "w_k");
        v3 = linear(src_kv, *wv, bv, layout, "w_v");
    }
    // Without projections Q, K and V are split from X (and X_kv) as they are, not from copies.
    const tensor3<T>& qs = wq ? q3 : x;
    const tensor3<T>& ks = wq ? k3 : src_kv;
    const tensor3<T>& vs = wq ? v3 : src_kv;
    const std::size_t hq = o.heads ? o.heads : 1, hkv = o.kv_heads ? o.kv_heads : hq;
    const char* kv_option = o.kv_heads ? "--kv-heads" : "--heads";
    p.q = split_by(qs, hq, "--heads", p.projected ? "Q = X·W_q" : "x");
    p.k = split_by(ks, hkv, kv_option, p.projected ? "K = X·W_k" : xkv ? "x_kv" : "x");
    p.v = split_by(vs, hkv, kv_option, p.projected ? "V = X·W_v" : xkv ? "x_kv" : "x");
    return p;
}


template prepared<float> prepare_qkv<float>(input_set&, const pipeline_options&);
template prepared<double> prepare_qkv<double>(input_set&, const pipeline_options&);

void add_inline_ids(std::vector<named_array>& inputs, const pipeline_options& options) {
    if (options.ids.empty()) return;
    for (const auto& a : inputs)
        if (a.name == "token_ids")
            throw usage_error("--ids", "token ids given twice " + expected_got("--ids or a token_ids array", "both"));
    const std::vector<std::int64_t> ids(options.ids.begin(), options.ids.end());
    inputs.push_back({"token_ids", int64_array({ids.size()}, ids)});
}

}  // namespace attn::pipeline
