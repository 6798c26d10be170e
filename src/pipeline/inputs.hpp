#pragma once
// Inputs of the pipeline (src/pipeline): the named arrays of a bundle → Q, K, V in
// (B, H, T, D), through projections, head splits, positional encodings and GQA checks.
// Internal to the pipeline; the entry point is include/attn/pipeline.hpp.

#include <array>
#include <cstdio>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "attn/core/attention.hpp"
#include "attn/core/heads.hpp"
#include "attn/error.hpp"
#include "attn/text.hpp"
#include "attn/pipeline.hpp"
#include "attn/tensor.hpp"

namespace attn::pipeline {

using namespace attn::core;

inline std::string num(std::size_t n) { return std::to_string(n); }

inline std::string rank_text(std::size_t r) { return num(r) + "-D"; }

inline std::string num(double v) { return general_number(v); }

/// `--ids 3,1,4` (options.ids) as the token_ids array (T,) appended to `inputs`. Throws
/// usage_error("--ids", "token ids given twice …") when `inputs` holds token_ids already.
void add_inline_ids(std::vector<named_array>& inputs, const pipeline_options& options);

/// Looks up inputs by their input names (docs/design.md §2, Inputs). Owns them, so that arrays already converted
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
xt::xtensor<T, N> to_tensor(const array& a, const std::array<std::size_t, N>& shape) {
    auto t = xt::xtensor<T, N>::from_shape(shape);
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

inline void check_float(const array& a, const char* name) {
    if (a.type == dtype::b1)
        throw value_error(name, "wrong dtype " + expected_got("a number type", std::string(dtype_name(a.type))));
}

inline void check_nonempty(const shape_t& s, const char* name) {
    for (auto d : s)
        if (d == 0) throw shape_error(name, "empty axis " + expected_got("no zero-length axis", shape_string(s)));
}

/// Q, K, V in (B, H, T, D) with what is needed to put results back in the input's layout.
template <class T>
struct prepared {
    tensor4<T> q, k, v;             // k, v: new keys only (before the past)
    std::size_t rank = 3;           // rank of the query source (2, 3 or 4)
    bool projected = false;
    /// X as it enters the projections (after an embedding lookup and --posenc), kept
    /// only when the `x` stage is dumped: (B, T, E), or (B, H, T, D) for a lone 4-D X.
    std::optional<tensor3<T>> x;
    std::optional<tensor4<T>> x4;
    /// q, k, v read in place (docs/design.md §6.4): when the inputs are already what the
    /// kernel reads — C-order (B, H, T, D) (or one head's (B, T, D), the same bytes) in the
    /// compute dtype — and the run neither changes nor dumps them, these view the inputs
    /// themselves, q, k and v above stay empty, and the inputs must be kept until the call.
    std::optional<std::array<tensor4_view<T>, 3>> in_place;
};

/// split_heads with the option to blame: `--heads 3` on a last axis of 8 is the option
/// not fitting the input (a usage error, docs/compute.md "Exit codes"), named in the user's terms.
template <class T>
inline tensor4<T> split_by(const tensor3<T>& x, std::size_t heads, const char* option, const char* name) {
    if (x.shape(2) % heads != 0)
        throw usage_error(option, std::string("does not divide ") + name + "'s last axis of " + num(x.shape(2)) + " " +
                                      expected_got("a divisor of " + num(x.shape(2)), num(heads)));
    return split_heads(x, heads, name);
}

/// A q, k or v input of rank 2 (T, D) or 3 (B, T, D) as (B, H, T, D/H): as_batched then
/// split_by, except that one head is converted straight into place ((B, T, D) and
/// (B, 1, T, D) are the same bytes), without the (B, T, D) copy in between.
template <class T>
tensor4<T> as_heads(const array& a, std::size_t heads, const char* option, const char* name) {
    if (heads == 1 && (a.rank() == 2 || a.rank() == 3))
        return to_tensor<T, 4>(a, {a.rank() == 3 ? a.shape[0] : 1, 1, a.shape[a.rank() - 2], a.shape[a.rank() - 1]});
    return split_by(as_batched<T>(a, name), heads, option, name);
}

/// The RoPE tables of B sequences of T new tokens with head width D (docs/design.md §4.1):
/// positions from `position_ids` ((B, T) or (T,) integers), else first + t; cos/sin from
/// `rope_cos`/`rope_sin` ((M, R/2) indexed by position, or (B, T, R/2) per token), else
/// from o.rope_theta. R = o.rotary_dim, or D. Throws value_error / shape_error.
rope_tables rope_tables_for(const input_set& in, const pipeline_options& o, std::size_t B, std::size_t T, std::size_t D,
                            std::size_t first);

/// Q, K, V from the inputs: given directly (q, k, v: rank 2, 3 or 4) or projected from X
/// (and X_kv) with w_q w_k w_v (+ biases) or in_proj_weight/in_proj_bias, heads split
/// head-major, --posenc added to X first. q, k and v given directly are released from
/// `in` (input_set::release) as each is converted. Throws value_error / shape_error / usage_error.
template <class T>
prepared<T> prepare_qkv(input_set& in, const pipeline_options& o);

extern template prepared<float> prepare_qkv<float>(input_set&, const pipeline_options&);
extern template prepared<double> prepare_qkv<double>(input_set&, const pipeline_options&);

}  // namespace attn::pipeline
