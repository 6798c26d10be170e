#pragma once
// Internal: what both kernels (attention.cpp, reference.cpp) do first — check that q, k,
// v and the mask fit together, and allocate the stages the options keep.

#include "attn/core/attention.hpp"
#include "attn/error.hpp"
#include "memory.hpp"

namespace attn::core {

/// q (B, Hq, Tq, Dk), k (B, Hkv, Tk, Dk), v (B, Hkv, Tk, Dv), Hq % Hkv == 0, mask sized
/// (B, Hq, Tq, Tk): the result with every kept Tq×Tk stage, lse and the output allocated.
/// Throws shape_error("attention", "q, k, v and mask shapes disagree").
/// T is the mask's: the views are not deduced, so tensors convert to them.
template <class T>
struct view_of_type {
    using type = tensor4_view<T>;
};

template <class T>
attention_result<T> allocate_result(typename view_of_type<T>::type q, typename view_of_type<T>::type k,
                                    typename view_of_type<T>::type v, const mask<T>& m, const attention_options& o) {
    const std::size_t B = q.shape[0], Hq = q.shape[1], Tq = q.shape[2], Dk = q.shape[3];
    const std::size_t Hkv = k.shape[1], Tk = k.shape[2], Dv = v.shape[3];
    if (k.shape[0] != B || v.shape[0] != B || k.shape[3] != Dk || v.shape[1] != Hkv || v.shape[2] != Tk ||
        Hkv == 0 || Hq % Hkv != 0 || m.B != B || m.H != Hq || m.Tq != Tq || m.Tk != Tk)
        throw shape_error("attention", "q, k, v and mask shapes disagree");
    attention_result<T> r;
    const std::array<std::size_t, 4> tt{B, Hq, Tq, Tk};
    if (o.keep_qk) r.qk = fresh_tensor<tensor4<T>>(tt);
    if (o.keep_scaled) r.scaled = fresh_tensor<tensor4<T>>(tt);
    if (o.keep_scores) r.scores = fresh_tensor<tensor4<T>>(tt);
    if (o.keep_weights) r.weights = fresh_tensor<tensor4<T>>(tt);
    if (o.keep_lse) r.lse = tensor3<T>::from_shape({B, Hq, Tq});
    r.output = fresh_tensor<tensor4<T>>(std::array<std::size_t, 4>{B, Hq, Tq, Dv});
    return r;
}

}  // namespace attn::core
