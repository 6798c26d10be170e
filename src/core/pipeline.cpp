#include "attn/core/pipeline.hpp"
#include "attn/core/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "attn/core/attention.hpp"
#include "attn/core/heads.hpp"
#include "attn/core/stats.hpp"
#include "attn/error.hpp"

namespace attn::core {

const std::vector<std::string>& stage_names() {
    static const std::vector<std::string> names{"q",      "k",       "v",      "qk",          "scaled",
                                                "scores", "weights", "output", "lse",         "present_key",
                                                "present_value", "stats"};
    return names;
}

namespace {

using io::named_array;

std::string num(std::size_t n) { return std::to_string(n); }

std::string rank_text(std::size_t r) { return num(r) + "-D"; }

std::string num(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

/// Looks up inputs by their DESIGN name. Owns them, so that arrays already converted
/// to compute tensors can be released (peak memory for long sequences).
class input_set {
public:
    explicit input_set(std::vector<named_array> arrays) : arrays_(std::move(arrays)) {}
    const array* find(const std::string& name) const {
        for (const auto& a : arrays_)
            if (a.name == name) return &a.value;
        return nullptr;
    }
    /// Frees the data of the named arrays (they stay findable, with their shapes).
    void release(std::initializer_list<const char*> names) {
        for (auto& a : arrays_)
            for (const char* n : names)
                if (a.name == n) a.value.data.clear();
    }

private:
    std::vector<named_array> arrays_;
};

template <class T, std::size_t N>
pooled_tensor<T, N> to_tensor(const array& a, const std::array<std::size_t, N>& shape) {
    auto t = pooled_tensor<T, N>::from_shape(shape);
    a.copy_to(t.data());
    return t;
}

/// A tensor input of rank 2 (T, D) or 3 (B, T, D), as (B, T, D).
template <class T>
tensor3<T> as_batched(const array& a, const char* name) {
    if (a.rank() == 2) return to_tensor<T, 3>(a, {1, a.shape[0], a.shape[1]});
    if (a.rank() == 3) return to_tensor<T, 3>(a, {a.shape[0], a.shape[1], a.shape[2]});
    throw shape_error(name, "wrong rank " + expected_got("(T, D) or (B, T, D)", shape_string(a.shape)));
}

template <class T>
tensor4<T> as_rank4(const array& a, const char* name) {
    if (a.rank() != 4) throw shape_error(name, "wrong rank " + expected_got("4-D", rank_text(a.rank())));
    return to_tensor<T, 4>(a, {a.shape[0], a.shape[1], a.shape[2], a.shape[3]});
}

template <class T>
tensor2<T> as_matrix(const array& a, const char* name) {
    if (a.rank() != 2) throw shape_error(name, "wrong rank " + expected_got("2-D", rank_text(a.rank())));
    return to_tensor<T, 2>(a, {a.shape[0], a.shape[1]});
}

template <class T>
std::optional<tensor1<T>> as_vector(const array* a, const char* name) {
    if (!a) return std::nullopt;
    if (a->rank() != 1) throw shape_error(name, "wrong rank " + expected_got("1-D", rank_text(a->rank())));
    return to_tensor<T, 1>(*a, {a->shape[0]});
}

void check_float(const array& a, const char* name) {
    if (a.type == dtype::b1)
        throw value_error(name, "wrong dtype " + expected_got("a number type", std::string(dtype_name(a.type))));
}

void check_nonempty(const shape_t& s, const char* name) {
    for (auto d : s)
        if (d == 0) throw shape_error(name, "empty axis " + expected_got("no zero-length axis", shape_string(s)));
}

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

/// Q, K, V in (B, H, T, D) with what is needed to put results back in the input's layout.
template <class T>
struct prepared {
    tensor4<T> q, k, v;             // k, v: new keys only (before the past)
    std::size_t rank = 3;           // rank of the query source (2, 3 or 4)
    bool projected = false;
};

template <class T>
prepared<T> prepare_qkv(const input_set& in, const pipeline_options& o) {
    prepared<T> p;
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
        if (p.rank == 4) {
            p.q = as_rank4<T>(*qa, "q");
            p.k = as_rank4<T>(*ka, "k");
            p.v = as_rank4<T>(*va, "v");
            if (o.heads && o.heads != p.q.shape(1))
                throw shape_error("--heads", "differs from q's head axis " + expected_got(num(p.q.shape(1)), num(o.heads)));
            if (o.kv_heads && o.kv_heads != p.k.shape(1))
                throw shape_error("--kv-heads", "differs from k's head axis " + expected_got(num(p.k.shape(1)), num(o.kv_heads)));
            return p;
        }
        const std::size_t hq = o.heads ? o.heads : 1, hkv = o.kv_heads ? o.kv_heads : hq;
        p.q = split_heads(as_batched<T>(*qa, "q"), hq, "q");
        p.k = split_heads(as_batched<T>(*ka, "k"), hkv, "k");
        p.v = split_heads(as_batched<T>(*va, "v"), hkv, "v");
        return p;
    }
    if (!xa) throw value_error("inputs", "nothing to attend over " + expected_got("x, or q, k and v", "neither"));
    const array* xkv = in.find("x_kv");
    check_float(*xa, "x");
    check_nonempty(xa->shape, "x");
    p.rank = xa->rank();
    if (o.posenc && p.rank != 2 && p.rank != 3)
        throw shape_error("x", "--posenc needs X of rank 2 or 3 " + expected_got("(T, E) or (B, T, E)", shape_string(xa->shape)));
    if (p.rank == 4 && !xkv && !in.find("w_q") && !in.find("in_proj_weight")) {
        // A lone 4-D array is self-attention over (B, H, T, D): Q = K = V = X.
        p.q = as_rank4<T>(*xa, "x");
        p.k = p.v = p.q;
        if (o.heads && o.heads != p.q.shape(1))
            throw shape_error("--heads", "differs from x's head axis " + expected_got(num(p.q.shape(1)), num(o.heads)));
        return p;
    }
    tensor3<T> x = as_batched<T>(*xa, "x");
    if (o.posenc) {
        // With a KV cache (self-attention), the new tokens follow the cached ones.
        const array* pk = in.find("past_key");
        add_posenc(x, o, !xkv && pk && pk->rank() == 4 ? pk->shape[2] : 0, "x");
    }
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
    tensor3<T> q3, k3, v3;
    if (wq) {
        p.projected = true;
        const weight_layout layout = in.find("in_proj_weight") ? weight_layout::out_in : o.layout;
        q3 = linear(x, *wq, bq, layout, "w_q");
        k3 = linear(src_kv, *wk, bk, layout, "w_k");
        v3 = linear(src_kv, *wv, bv, layout, "w_v");
    } else {
        q3 = x;
        k3 = src_kv;
        v3 = src_kv;
    }
    const std::size_t hq = o.heads ? o.heads : 1, hkv = o.kv_heads ? o.kv_heads : hq;
    p.q = split_heads(q3, hq, p.projected ? "w_q" : "x");
    p.k = split_heads(k3, hkv, p.projected ? "w_k" : "x_kv");
    p.v = split_heads(v3, hkv, p.projected ? "w_v" : "x_kv");
    return p;
}

/// Right-aligns an attn_mask or key_padding bias against (B, Hq, Tq, Tk).
std::array<std::size_t, 4> broadcast_shape(const array& a, const std::array<std::size_t, 4>& full, const char* name) {
    if (a.rank() > 4 || a.rank() == 0)
        throw shape_error(name, "wrong rank " + expected_got("1-D to 4-D", rank_text(a.rank())));
    std::array<std::size_t, 4> s{1, 1, 1, 1};
    std::copy(a.shape.begin(), a.shape.end(), s.begin() + static_cast<std::ptrdiff_t>(4 - a.rank()));
    bool ok = s[3] >= 1 && s[3] <= full[3];
    for (int d = 0; d < 3; ++d) ok = ok && (s[d] == 1 || s[d] == full[d]);
    if (!ok)
        throw shape_error(name, "does not broadcast to (B, Hq, Tq, Tk) " +
                                    expected_got(shape_string({full[0], full[1], full[2], full[3]}), shape_string(a.shape)));
    return s;
}

std::vector<std::size_t> key_lengths(const input_set& in, const pipeline_options& o, std::size_t B, std::size_t Tk) {
    std::vector<std::size_t> lengths = o.lengths;
    const char* source = "--lengths";
    if (lengths.empty()) {
        if (const array* la = in.find("lengths")) {
            source = "lengths";
            if (la->rank() != 1 || !is_integer(la->type))
                throw value_error("lengths", "wrong kind " + expected_got("1-D integers", rank_text(la->rank()) + " " + std::string(dtype_name(la->type))));
            for (auto v : la->to_vector<std::int64_t>()) {
                if (v < 0) throw value_error("lengths", "negative length " + expected_got("≥ 0", std::to_string(v)));
                lengths.push_back(static_cast<std::size_t>(v));
            }
        }
    }
    if (lengths.empty()) return lengths;
    if (lengths.size() != B)
        throw value_error(source, "one length per batch item " + expected_got(num(B) + (B == 1 ? " value" : " values"), num(lengths.size())));
    for (auto l : lengths)
        if (l > Tk) throw value_error(source, "length exceeds the number of keys " + expected_got("≤ " + num(Tk), num(l)));
    return lengths;
}

/// (B, Tk) "may attend" flags from a rank-1/2 per-key array; rank 1 broadcasts over B.
std::vector<std::uint8_t> per_key(const array& a, std::size_t B, std::size_t Tk, const char* name,
                                  bool (*allowed)(double, double), double arg) {
    const bool fits = (a.rank() == 2 && a.shape[0] == B && a.shape[1] == Tk) || (a.rank() == 1 && a.shape[0] == Tk);
    if (!fits) throw shape_error(name, "wrong shape " + expected_got(shape_string({B, Tk}), shape_string(a.shape)));
    std::vector<std::uint8_t> out(B * Tk);
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t j = 0; j < Tk; ++j) out[b * Tk + j] = allowed(a.value(a.rank() == 2 ? b * Tk + j : j), arg);
    return out;
}

template <class T>
mask<T> build_mask(const input_set& in, const pipeline_options& o, std::size_t B, std::size_t Hq, std::size_t Tq,
                   std::size_t Tk, std::size_t past, std::vector<std::string>& used) {
    mask<T> m;
    m.B = B, m.H = Hq, m.Tq = Tq, m.Tk = Tk;
    if (o.mask_fill) m.fill = static_cast<T>(*o.mask_fill);
    m.lengths = key_lengths(in, o, B, Tk);
    const std::array<std::size_t, 4> full{B, Hq, Tq, Tk};

    bool padding = !m.lengths.empty();
    if (const array* kpm = in.find("key_padding_mask")) {
        padding = true;
        if (is_float(kpm->type)) {
            // A float key_padding_mask is added to the scores (nn.MultiheadAttention).
            auto s = broadcast_shape(*kpm, full, "key_padding_mask");
            if (kpm->rank() != 2 && kpm->rank() != 1)
                throw shape_error("key_padding_mask", "wrong shape " + expected_got(shape_string({B, Tk}), shape_string(kpm->shape)));
            broadcast_mask<T> bm;
            bm.shape = kpm->rank() == 2 ? std::array<std::size_t, 4>{kpm->shape[0], 1, 1, kpm->shape[1]} : s;
            if (bm.shape[3] != Tk || (bm.shape[0] != B && bm.shape[0] != 1))
                throw shape_error("key_padding_mask", "wrong shape " + expected_got(shape_string({B, Tk}), shape_string(kpm->shape)));
            bm.data = kpm->to_vector<T>();
            m.bias.push_back(std::move(bm));
        } else {
            m.key_allowed = per_key(*kpm, B, Tk, "key_padding_mask", [](double v, double) { return v == 0.0; }, 0.0);
        }
    }
    if (o.pad_id) {
        const array* ids = in.find("token_ids");
        if (!ids) throw usage_error("--pad-id", "needs token ids " + expected_got("a token_ids array", "none"));
        if (!is_integer(ids->type))
            throw value_error("token_ids", "wrong dtype " + expected_got("integers", std::string(dtype_name(ids->type))));
        padding = true;
        auto allowed = per_key(*ids, B, Tk, "token_ids", [](double v, double pad) { return v != pad; },
                               static_cast<double>(*o.pad_id));
        if (m.key_allowed.empty())
            m.key_allowed = std::move(allowed);
        else
            for (std::size_t i = 0; i < allowed.size(); ++i) m.key_allowed[i] &= allowed[i];
    }
    if (o.padding && !padding)
        throw usage_error("--mask", "padding needs a source " +
                                        expected_got("--lengths, a key_padding_mask or token_ids with --pad-id", "none"));

    if (o.causal) {
        m.causal = true;
        m.causal_offset.resize(B);
        for (std::size_t b = 0; b < B; ++b) {
            const std::size_t valid = m.lengths.empty() ? Tk : m.lengths[b];
            m.causal_offset[b] = o.align == causal_align::top_left
                                     ? static_cast<long long>(past)
                                     : static_cast<long long>(valid) - static_cast<long long>(Tq);
        }
        used.push_back("causal");
    }
    if (padding) used.push_back("padding");

    if (const array* am = in.find("attn_mask")) {
        const auto s = broadcast_shape(*am, full, "attn_mask");
        if (is_float(am->type)) {
            broadcast_mask<T> bm;
            bm.shape = s;
            bm.data = am->to_vector<T>();
            m.bias.push_back(std::move(bm));
        } else {
            broadcast_mask<std::uint8_t> bm;
            bm.shape = s;
            bm.data.resize(am->size());
            for (std::size_t i = 0; i < am->size(); ++i) bm.data[i] = am->value(i) != 0.0;
            m.allowed.push_back(std::move(bm));
        }
        used.push_back("attn_mask");
    }
    return m;
}

/// Mean over the head axis: (B, H, R, C) → (B, 1, R, C).
template <class T>
tensor4<T> mean_heads(const tensor4<T>& t) {
    const std::size_t B = t.shape(0), H = t.shape(1), R = t.shape(2), C = t.shape(3);
    tensor4<T> out = tensor4<T>::from_shape({B, 1, R, C});
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t i = 0; i < R * C; ++i) {
            T s = 0;
            for (std::size_t h = 0; h < H; ++h) s += t.data()[(b * H + h) * R * C + i];
            out.data()[b * R * C + i] = s / static_cast<T>(H);
        }
    return out;
}

/// Shape of a (B, H, R, C) stage in the input's layout (DESIGN §2): the head axis is
/// dropped when there is one head and the input had no head axis, and the batch axis
/// when the input had none (rank 2: (H, R, C) as PyTorch's unbatched MHA gives).
shape_t layout_shape(const shape_t& full, std::size_t input_rank) {
    shape_t s = full;
    if (s[1] == 1 && input_rank < 4) s.erase(s.begin() + 1);
    if (input_rank == 2) s.erase(s.begin());
    return s;
}

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
array in_input_layout(const tensor4<T>& t, std::size_t input_rank, std::shared_ptr<const void> owner) {
    if (input_rank == 4) {
        shape_t s{t.shape(0), t.shape(1), t.shape(2), t.shape(3)};
        return owner ? view_of(std::move(s), std::move(owner), t) : array::from<T>(std::move(s), t.data());
    }
    tensor3<T> m = merge_heads(t);
    shape_t s{m.shape(0), m.shape(1), m.shape(2)};
    if (input_rank == 2) s.erase(s.begin());
    return adopt(std::move(s), std::move(m));
}

/// A Tq×Tk (or lse) stage in the input's leading axes, viewing `t` (kept by `owner`).
template <class T>
array stage_array(const tensor4<T>& t, std::size_t input_rank, std::shared_ptr<const void> owner) {
    return view_of(layout_shape({t.shape(0), t.shape(1), t.shape(2), t.shape(3)}, input_rank), std::move(owner), t);
}

/// A 0-d or rank-n int64 array from C-order values.
array int64_array(shape_t shape, const std::vector<std::int64_t>& v) {
    array a;
    a.type = dtype::i8;
    a.shape = std::move(shape);
    a.data.resize(v.size() * sizeof(std::int64_t));
    if (!v.empty()) std::memcpy(a.data.data(), v.data(), a.data.size());
    return a;
}

/// The `stats` stage as tensors "stats.dk", "stats.var_q", … (stats.hpp): the variances
/// 0-d, the row statistics shaped like lse (the Tq×Tk stage shape without the key
/// axis). With --average-heads the row statistics describe the head-averaged weights
/// (the weights that are dumped); the variances always cover every head.
/// dk and argmax are int64, the rest in the compute dtype.
template <class T>
void append_stats(io::document& doc, const tensor4<T>& q, const tensor4<T>& k, const attention_result<T>& r,
                  std::size_t rank, bool average_heads) {
    const tensor4<T> averaged = average_heads ? mean_heads(r.weights) : tensor4<T>();
    const tensor4<T>& w = average_heads ? averaged : r.weights;
    const std::size_t B = w.shape(0), H = w.shape(1), Tq = w.shape(2), Tk = w.shape(3);
    const attention_stats st = compute_stats<T>(q.shape(3), q.data(), q.size(), k.data(), k.size(), r.qk.data(),
                                                r.scaled.data(), r.qk.size(), w.data(), B * H * Tq, Tk);
    shape_t rows = layout_shape({B, H, Tq, 1}, average_heads ? std::min<std::size_t>(rank, 3) : rank);
    rows.pop_back();
    const auto scalar = [](double v) {
        const T x = static_cast<T>(v);
        return array::from<T>({}, &x);
    };
    const auto per_row = [&](const std::vector<double>& v) {
        const std::vector<T> x(v.begin(), v.end());
        return array::from<T>(rows, x.data());
    };
    doc.tensors.push_back({"stats.dk", int64_array({}, {static_cast<std::int64_t>(st.dk)})});
    doc.tensors.push_back({"stats.var_q", scalar(st.var_q)});
    doc.tensors.push_back({"stats.var_k", scalar(st.var_k)});
    doc.tensors.push_back({"stats.var_qk", scalar(st.var_qk)});
    doc.tensors.push_back({"stats.var_scaled", scalar(st.var_scaled)});
    doc.tensors.push_back({"stats.entropy", per_row(st.rows.entropy)});
    doc.tensors.push_back({"stats.max_weight", per_row(st.rows.max_weight)});
    doc.tensors.push_back({"stats.argmax", int64_array(rows, st.rows.argmax)});
    doc.tensors.push_back({"stats.row_sum", per_row(st.rows.row_sum)});
}

template <class T>
io::document run(input_set& in, const std::vector<std::string>& bundle_tokens, const pipeline_options& o) {
    for (const auto& s : o.dump)
        if (std::find(stage_names().begin(), stage_names().end(), s) == stage_names().end())
            throw usage_error("--dump", "unknown stage '" + s + "' (expected q, k, v, qk, scaled, scores, weights, output, lse, present_key, present_value or stats)");
    const auto wants = [&](const char* s) { return std::find(o.dump.begin(), o.dump.end(), s) != o.dump.end(); };
    if (o.softcap < 0 || !std::isfinite(o.softcap))
        throw usage_error("--softcap", "must be finite and not negative " + expected_got("≥ 0", num(o.softcap)));

    prepared<T> p = prepare_qkv<T>(in, o);
    in.release({"q", "k", "v", "x", "x_kv"});
    const std::size_t B = p.q.shape(0), Hq = p.q.shape(1), Tq = p.q.shape(2), Dk = p.q.shape(3);
    if (p.k.shape(0) != B)
        throw shape_error("k", "batch size differs from q's " + expected_got(num(B), num(p.k.shape(0))));
    if (p.k.shape(3) != Dk)
        throw shape_error("k", "head width differs from q's (Dk) " + expected_got(num(Dk), num(p.k.shape(3))));
    if (p.v.shape(0) != B || p.v.shape(1) != p.k.shape(1) || p.v.shape(2) != p.k.shape(2))
        throw shape_error("v", "does not match k's batch, heads and length " +
                                   expected_got("(" + num(B) + ", " + num(p.k.shape(1)) + ", " + num(p.k.shape(2)) + ", Dv)",
                                                shape_string({p.v.shape(0), p.v.shape(1), p.v.shape(2), p.v.shape(3)})));
    const std::size_t Hkv = p.k.shape(1);
    if (Hq % Hkv != 0)
        throw shape_error("heads", "query heads are not a multiple of key/value heads " +
                                       expected_got("Hq % Hkv == 0", "Hq = " + num(Hq) + ", Hkv = " + num(Hkv)));

    // KV cache: past keys/values come first on the sequence axis (ONNX present_key/value).
    tensor4<T> key, value;
    std::size_t past = 0;
    const array* pk = in.find("past_key");
    const array* pv = in.find("past_value");
    if ((pk != nullptr) != (pv != nullptr))
        throw value_error("inputs", "past_key and past_value come together " + expected_got("both", pk ? "past_key only" : "past_value only"));
    if (pk) {
        const tensor4<T> past_k = as_rank4<T>(*pk, "past_key");
        const tensor4<T> past_v = as_rank4<T>(*pv, "past_value");
        if (past_k.shape(2) != past_v.shape(2))
            throw shape_error("past_value", "length differs from past_key's " + expected_got(num(past_k.shape(2)), num(past_v.shape(2))));
        key = concat_sequence(past_k, p.k, "past_key");
        value = concat_sequence(past_v, p.v, "past_value");
        past = past_k.shape(2);
        in.release({"past_key", "past_value"});
    } else {
        key = std::move(p.k);  // no cache: the new keys are all the keys
        value = std::move(p.v);
    }
    const tensor4<T>& new_k = pk ? p.k : key;
    const tensor4<T>& new_v = pk ? p.v : value;
    const std::size_t Tk = key.shape(2);

    std::vector<std::string> masks_used;
    const mask<T> m = build_mask<T>(in, o, B, Hq, Tq, Tk, past, masks_used);

    attention_options ao;
    ao.scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(Dk));
    ao.softcap = o.softcap;
    ao.rows = o.rows;
    // stats reads qk, scaled and weights, so the kernel keeps them even when not dumped.
    ao.keep_qk = wants("qk") || wants("stats");
    ao.keep_scaled = wants("scaled") || wants("stats");
    ao.keep_scores = wants("scores");
    ao.keep_weights = wants("weights") || wants("stats");
    ao.keep_lse = wants("lse");
    ao.threads = o.threads;
    // The result is shared by the arrays of the document, which view its tensors
    // instead of copying them.
    const auto result = std::make_shared<attention_result<T>>(
        o.kernel == kernel_kind::reference ? attention_reference(p.q, key, value, m, ao) : attention(p.q, key, value, m, ao));
    const attention_result<T>& r = *result;

    io::document doc;
    doc.tokens = o.tokens.empty() ? bundle_tokens : o.tokens;
    if (!doc.tokens.empty() && doc.tokens.size() != Tq)
        throw value_error("--tokens", "one token per query " + expected_got(num(Tq), num(doc.tokens.size())));

    const std::size_t rank = p.rank;
    const array* wo = in.find("w_o");
    for (const auto& s : o.dump) {
        if (s == "stats") {
            append_stats(doc, p.q, key, r, rank, o.average_heads);
            continue;
        }
        array a;
        if (s == "q") a = in_input_layout(p.q, rank, nullptr);
        else if (s == "k") a = in_input_layout(new_k, rank, nullptr);
        else if (s == "v") a = in_input_layout(new_v, rank, nullptr);
        else if (s == "present_key") a = array::from<T>({B, Hkv, Tk, Dk}, key.data());
        else if (s == "present_value") a = array::from<T>({B, Hkv, Tk, value.shape(3)}, value.data());
        else if (s == "lse") {
            auto l4 = std::make_shared<tensor4<T>>(tensor4<T>::from_shape({B, Hq, Tq, 1}));
            std::copy(r.lse.begin(), r.lse.end(), l4->begin());
            if (o.average_heads) *l4 = mean_heads(*l4);
            a = stage_array(*l4, o.average_heads ? std::min<std::size_t>(rank, 3) : rank, l4);
            a.shape.pop_back();
        } else if (s == "output") {
            if (wo) {
                const tensor3<T> merged = merge_heads(r.output);
                tensor3<T> y = linear(merged, as_matrix<T>(*wo, "w_o"), as_vector<T>(in.find("b_o"), "b_o"), o.layout, "w_o");
                shape_t shape{y.shape(0), y.shape(1), y.shape(2)};
                if (rank == 2) shape.erase(shape.begin());
                a = adopt(std::move(shape), std::move(y));
            } else {
                a = in_input_layout(r.output, rank, result);
            }
        } else {
            const tensor4<T>& t = s == "qk" ? r.qk : s == "scaled" ? r.scaled : s == "scores" ? r.scores : r.weights;
            if (o.average_heads) {
                auto mean = std::make_shared<tensor4<T>>(mean_heads(t));
                a = stage_array(*mean, std::min<std::size_t>(rank, 3), mean);
            } else {
                a = stage_array(t, rank, result);
            }
        }
        doc.tensors.push_back({s, std::move(a)});
    }

    auto& meta = doc.meta;
    meta["attn_version"] = ATTN_VERSION;
    meta["dtype"] = std::string(dtype_name(dtype_of<T>()));
    meta["scale"] = ao.scale;
    meta["softcap"] = o.softcap;
    meta["mask"] = masks_used;
    if (o.causal) meta["causal_align"] = o.align == causal_align::top_left ? "top-left" : "bottom-right";
    if (!m.lengths.empty()) meta["lengths"] = m.lengths;
    if (o.pad_id) meta["pad_id"] = *o.pad_id;
    if (o.mask_fill) meta["mask_fill"] = *o.mask_fill;
    else meta["mask_fill"] = "-Infinity";
    meta["masked_rows"] = o.rows == masked_rows::zero ? "zero" : "nan";
    if (o.kernel == kernel_kind::reference) meta["kernel"] = "reference";
    meta["heads"] = Hq;
    meta["kv_heads"] = Hkv;
    meta["past_length"] = past;
    if (p.projected) meta["weight_layout"] = in.find("in_proj_weight") || o.layout == weight_layout::out_in ? "out-in" : "in-out";
    meta["average_heads"] = o.average_heads;
    if (o.posenc) {
        meta["posenc"] = posenc_style_name(*o.posenc);
        meta["posenc_base"] = o.posenc_base;
    }
    nlohmann::ordered_json shapes = nlohmann::ordered_json::object();
    for (const auto& t : doc.tensors) shapes[t.name] = t.value.shape;
    meta["shapes"] = shapes;
    return doc;
}

}  // namespace

io::document compute(std::vector<io::named_array> inputs, const std::vector<std::string>& bundle_tokens,
                     const pipeline_options& options) {
    input_set in(std::move(inputs));
    dtype t = dtype::f8;
    if (options.compute_type) {
        t = *options.compute_type;
    } else {
        const array* src = in.find("q") ? in.find("q") : in.find("x");
        if (src && (src->type == dtype::f4 || src->type == dtype::f2)) t = dtype::f4;
    }
    if (t == dtype::f4) return run<float>(in, bundle_tokens, options);
    return run<double>(in, bundle_tokens, options);
}

}  // namespace attn::core
