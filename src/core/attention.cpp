#include "attn/core/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <omp.h>

#include "attn/error.hpp"
#include "blas.hpp"

namespace attn::core {

namespace {

constexpr std::size_t query_block = 64;

/// Copies n values into a full row of length Tk, filling the tail with `tail`.
template <class T>
void store_row(T* dst, const T* src, std::size_t n, std::size_t Tk, T tail) {
    std::copy_n(src, n, dst);
    std::fill(dst + n, dst + Tk, tail);
}

}  // namespace

template <class T>
attention_result<T> attention(const tensor4<T>& q, const tensor4<T>& k, const tensor4<T>& v, const mask<T>& m,
                              const attention_options& o) {
    const std::size_t B = q.shape(0), Hq = q.shape(1), Tq = q.shape(2), Dk = q.shape(3);
    const std::size_t Hkv = k.shape(1), Tk = k.shape(2), Dv = v.shape(3);
    if (k.shape(0) != B || v.shape(0) != B || k.shape(3) != Dk || v.shape(1) != Hkv || v.shape(2) != Tk ||
        Hkv == 0 || Hq % Hkv != 0 || m.B != B || m.H != Hq || m.Tq != Tq || m.Tk != Tk)
        throw shape_error("attention", "q, k, v and mask shapes disagree");
    const std::size_t group = Hq / Hkv;
    constexpr T neg_inf = -std::numeric_limits<T>::infinity();
    const T nan = std::numeric_limits<T>::quiet_NaN();
    const T scale = static_cast<T>(o.scale);
    const T cap = static_cast<T>(o.softcap);
    const bool inf_fill = std::isinf(m.fill) && m.fill < 0;
    // Keys past the visible prefix can be skipped only when nothing needs their values.
    const bool full_rows = o.keep_qk || o.keep_scaled || o.keep_scores || !inf_fill;

    attention_result<T> r;
    const std::array<std::size_t, 4> tt{B, Hq, Tq, Tk};
    if (o.keep_qk) r.qk = tensor4<T>::from_shape(tt);
    if (o.keep_scaled) r.scaled = tensor4<T>::from_shape(tt);
    if (o.keep_scores) r.scores = tensor4<T>::from_shape(tt);
    if (o.keep_weights) r.weights = tensor4<T>::from_shape(tt);
    if (o.keep_lse) r.lse = tensor3<T>::from_shape({B, Hq, Tq});
    r.output = tensor4<T>::from_shape({B, Hq, Tq, Dv});

    const std::size_t blocks = (Tq + query_block - 1) / query_block;
    const long long tasks = static_cast<long long>(B * Hq * blocks);
    openblas_set_num_threads(1);
    const int threads = o.threads > 0 ? o.threads : omp_get_max_threads();

#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (long long task = 0; task < tasks; ++task) {
        const std::size_t blk = static_cast<std::size_t>(task) % blocks;
        const std::size_t h = (static_cast<std::size_t>(task) / blocks) % Hq;
        const std::size_t b = static_cast<std::size_t>(task) / blocks / Hq;
        const std::size_t i0 = blk * query_block, i1 = std::min(Tq, i0 + query_block), nb = i1 - i0;
        const std::size_t hk = h / group;

        std::size_t kend = Tk;
        if (!full_rows) {
            kend = 0;
            for (std::size_t i = i0; i < i1; ++i) kend = std::max(kend, m.visible_end(b, i));
        }
        thread_local std::vector<T> s_buf, p_buf;
        s_buf.resize(nb * std::max<std::size_t>(kend, 1));
        p_buf.resize(nb * std::max<std::size_t>(kend, 1));
        T* S = s_buf.data();
        T* P = p_buf.data();
        const T* Qp = &q(b, h, i0, 0);
        const T* Kp = &k(b, hk, 0, 0);
        const T* Vp = &v(b, hk, 0, 0);
        T* Op = &r.output(b, h, i0, 0);

        if (kend > 0) {
            if (Dk > 0)
                detail::gemm(false, true, static_cast<int>(nb), static_cast<int>(kend), static_cast<int>(Dk), T(1),
                             Qp, static_cast<int>(Dk), Kp, static_cast<int>(Dk), T(0), S, static_cast<int>(kend));
            else
                std::fill(S, S + nb * kend, T(0));
        }
        for (std::size_t r_ = 0; r_ < nb; ++r_) {
            const std::size_t i = i0 + r_;
            T* srow = S + r_ * kend;
            T* prow = P + r_ * kend;
            if (o.keep_qk) store_row(&r.qk(b, h, i, 0), srow, kend, Tk, neg_inf);
            for (std::size_t j = 0; j < kend; ++j) srow[j] *= scale;
            if (cap > 0)
                for (std::size_t j = 0; j < kend; ++j) srow[j] = cap * std::tanh(srow[j] / cap);
            if (o.keep_scaled) store_row(&r.scaled(b, h, i, 0), srow, kend, Tk, neg_inf);
            const bool full = kend == 0 || m.apply_row(b, h, i, srow, prow, kend);
            if (o.keep_scores) store_row(&r.scores(b, h, i, 0), prow, kend, Tk, neg_inf);
            const T lse = softmax_row(prow, prow, kend, full, o.rows);
            if (o.keep_lse) r.lse(b, h, i) = lse;
            if (o.keep_weights)
                store_row(&r.weights(b, h, i, 0), prow, kend, Tk, full && o.rows == masked_rows::nan ? nan : T(0));
        }
        if (Dv == 0) continue;
        if (kend > 0)
            detail::gemm(false, false, static_cast<int>(nb), static_cast<int>(Dv), static_cast<int>(kend), T(1), P,
                         static_cast<int>(kend), Vp, static_cast<int>(Dv), T(0), Op, static_cast<int>(Dv));
        else
            std::fill(Op, Op + nb * Dv, o.rows == masked_rows::nan ? nan : T(0));
    }
    return r;
}

template attention_result<float> attention(const tensor4<float>&, const tensor4<float>&, const tensor4<float>&,
                                           const mask<float>&, const attention_options&);
template attention_result<double> attention(const tensor4<double>&, const tensor4<double>&,
                                            const tensor4<double>&, const mask<double>&, const attention_options&);

}  // namespace attn::core
