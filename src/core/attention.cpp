#include "attn/core/attention.hpp"
#include "kernels/kernels.hpp"
#include "attn/core/reference.hpp"
#include "kernel_result.hpp"
#include "attn/threads.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <omp.h>

#include "attn/error.hpp"
#include "blas.hpp"
#include "isa.hpp"

// The dispatcher (llm.c's pattern: one switch over numbered kernels, here in
// core/kernels/): checks, blocking and threads, then each block to the reference, GEMM or
// fused kernel.
namespace attn::core {

using namespace kernels;

// One level of parallelism (docs/toolchain.md §4): BLAS runs single-threaded inside the
// kernel's OpenMP tasks. Set once, when the program starts, not in each call. OpenBLAS's
// OpenMP build implements openblas_set_num_threads(1) as omp_set_num_threads(1), so the
// process's OpenMP setting is put back at once (the text writers keep their threads).
[[maybe_unused]] const bool single_threaded_blas = [] {
    const int process_threads = omp_get_max_threads();
    openblas_set_num_threads(1);
    omp_set_num_threads(process_threads);
    return true;
}();

namespace {

template <class T>
bool all_finite(tensor4_view<T> t) {
    // On the exponent bits (all ones: ±∞ or NaN), an integer OR the compiler vectorises:
    // std::isfinite's compares stayed scalar, and this serial scan of q, k and v was 5% of
    // an output-only call at T=512.
    using bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    constexpr bits exponent = static_cast<bits>(sizeof(T) == 4 ? 0x7f800000ull : 0x7ff0000000000000ull);
    const T* x = t.data;
    bits any = 0;
    for (std::size_t i = 0; i < t.size(); ++i) {
        bits b;
        std::memcpy(&b, x + i, sizeof b);
        any |= (b & exponent) == exponent;
    }
    return any == 0;
}

/// An owned copy of a view, for the reference kernel (which reads tensors).
template <class T>
tensor4<T> copy_of(tensor4_view<T> t) {
    tensor4<T> c = tensor4<T>::from_shape(t.shape);
    std::copy_n(t.data, t.size(), c.data());
    return c;
}

}  // namespace

template <class T>
attention_result<T> attention(tensor4_view<T> q, tensor4_view<T> k, tensor4_view<T> v, const mask<T>& m,
                              const attention_options& o) {
    // NaN or ±∞ in Q, K or V: the reference kernel, whose loops follow the one rule for
    // them (docs/conventions.md) — the GEMMs would multiply masked keys' values by 0 and
    // the tiles of the two paths would see different cells. One scan, O(size), decides.
    if (!all_finite(q) || !all_finite(k) || !all_finite(v))
        return attention_reference(copy_of(q), copy_of(k), copy_of(v), m, o);
    const std::size_t B = q.shape[0], Hq = q.shape[1], Tq = q.shape[2], Dk = q.shape[3];
    const std::size_t Hkv = k.shape[1], Tk = k.shape[2], Dv = v.shape[3];
    const detail::row_kernels<T>& ops = detail::row_ops<T>();  // throws for a bad ATTN_ISA
    attention_result<T> r = allocate_result(q, k, v, m, o);
    const std::size_t group = Hq / Hkv;
    const bool inf_fill = std::isinf(m.fill) && m.fill < 0;
    const bool materialise = o.keep_qk || o.keep_scaled || o.keep_scores || o.keep_weights;
    // Keys past the visible prefix can be skipped only when nothing needs their values.
    const bool full_rows = o.keep_qk || o.keep_scaled || o.keep_scores || !inf_fill;
    // float32 softmax in base 2: with log2(e) folded into the GEMM's scale, 2^(s − max)
    // costs three operations fewer than e^(s − max) (rowops.hpp). Only where no stage
    // shows the scores and nothing is added to them but −∞ (a softcap, float masks and
    // ALiBi act on natural units). The weights stay within the same few ulp of exact.
    const bool base2 = std::is_same_v<T, float> && !o.keep_qk && !o.keep_scaled && !o.keep_scores &&
                       o.softcap <= 0 && inf_fill && m.bias.empty() && !m.adds_to_scores();

    if (B * Hq * Tq == 0) return r;

    const dims d{Tq, Tk, Dk, Dv};
    // A vector path, keeping at most the weights of the Tq×Tk stages: the fused kernel
    // (unless ATTN_STREAM=blas).
    const bool fused =
        !o.keep_qk && !o.keep_scaled && !o.keep_scores && ops.score_tile != nullptr && detail::fused_stream();
    const int budget = o.threads > 0 ? o.threads : thread_budget();  // attn/threads.hpp
    std::size_t query_block = fused && o.keep_weights ? fused_weight_chunks * weight_chunk_rows(Tk, sizeof(T))
                              : fused                 ? fused_block_rows
                              : materialise ? materialise_rows
                              : m.causal    ? stream_rows_causal
                                            : stream_rows;
    // The fused kernel's rows do not depend on the blocking: blocks down to 128 rows give
    // each thread about 8 tasks, so that the others take over a descheduled thread's share
    // on a shared machine and the last tasks end together (T=512, 8 heads, 2 threads: 32
    // tasks, not 8; 8 per thread measured 4-8% faster than 4 at T=512 and 1024).
    while (fused && !o.keep_weights && query_block > 128 &&
           B * Hq * ((Tq + query_block - 1) / query_block) < 8 * static_cast<std::size_t>(std::max(budget, 1)))
        query_block /= 2;
    const std::size_t blocks = (Tq + query_block - 1) / query_block;
    const long long tasks = static_cast<long long>(B * Hq * blocks);
    // OpenBLAS's OpenMP build implements openblas_set_num_threads(n) as
    // omp_set_num_threads(n), so this thread's OpenMP setting is read first and put
    // back on return: later parallel regions of the process (the next call, the text
    // writers) keep their threads.
    const int caller_threads = omp_get_max_threads();
    struct restore_threads {
        int n;
        ~restore_threads() { omp_set_num_threads(n); }
    } restore{caller_threads};
    // Waking a second thread costs more than a few MFLOP of work: small problems run
    // on fewer threads (each gets at least ~64 MFLOP, about a millisecond), and never more than tasks.
    const double work = 4.0 * static_cast<double>(B * Hq * Tq) * static_cast<double>(Tk) * std::max(Dk, Dv);
    const long long useful = std::max(1LL, std::min(tasks, static_cast<long long>(work / 64e6)));
    const int threads = static_cast<int>(std::min<long long>(budget, useful));
    // A one-thread region is inactive, so the OpenMP build would fork its own team for
    // every small GEMM (T=128: 1 ms became 40 ms): the setting is one for such a call.
    if (threads == 1) omp_set_num_threads(1);
    // The fused kernel reads K and V packed (packed_kv), at most fused_pack_bytes of them at
    // a time: the kv slots go in waves, each packed, then its tasks run (a slot's tasks are
    // consecutive: query heads of one kv head, then their blocks).
    const std::size_t slots = B * Hkv;
    std::size_t wave = slots;
    if (fused) {
        const std::size_t slot_bytes = packed_kv<T>::layout(Tk, Dk, Dv).slot_bytes();
        wave = std::clamp<std::size_t>(fused_pack_bytes / std::max<std::size_t>(slot_bytes, 1), 1, slots);
    }
    const long long slot_tasks = static_cast<long long>(group * blocks);
    for (std::size_t s0 = 0; s0 < slots; s0 += wave) {
        const std::size_t s1 = std::min(slots, s0 + wave);
        packed_kv<T> packed;
        if (fused) packed = pack_kv(k, v, s0, s1, threads);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (long long task = 0; task < static_cast<long long>(s1 - s0) * slot_tasks; ++task) {
            // Block rank outermost, the wave's query heads inside: under a causal mask the
            // last (largest) blocks of every head go first, so that the threads end together
            // (T=2048: 32 tasks, the last one 1/9 of a head's work).
            const std::size_t heads = (s1 - s0) * group, rank = static_cast<std::size_t>(task) / heads;
            const std::size_t blk = m.causal ? blocks - 1 - rank : rank;
            const std::size_t bh = s0 * group + static_cast<std::size_t>(task) % heads;  // b·Hq + h
            const std::size_t h = bh % Hq, b = bh / Hq;
            const std::size_t i0 = blk * query_block;
            const block_job<T> job{b,
                                   h,
                                   i0,
                                   std::min(Tq, i0 + query_block) - i0,
                                   q.data + ((b * Hq + h) * Tq + i0) * Dk,
                                   k.data + (b * Hkv + h / group) * Tk * Dk,
                                   v.data + (b * Hkv + h / group) * Tk * Dv,
                                   r.output.data() + ((b * Hq + h) * Tq + i0) * Dv};
            if (fused) {
                const std::size_t slot = b * Hkv + h / group - s0;
                fused_block(ops, job, d, m, o, r, packed.k_of(slot), packed.v_of(slot), packed.vcs(), inf_fill, base2);
                continue;
            }
            if (materialise)
                materialise_block(ops, job, d, m, o, r, full_rows, base2);
            else
                stream_block(ops, job, d, m, o, r, inf_fill, base2);
        }
    }
    return r;
}

template <class T>
attention_result<T> attention_by_head(tensor4_view<T> q, tensor4_view<T> k, tensor4_view<T> v, const mask<T>& m,
                                      const attention_options& options, bool reference,
                                      const std::function<void(std::size_t head, const tensor4<T>& weights)>& each_head) {
    if (options.keep_qk || options.keep_scaled || options.keep_scores)
        throw usage_error("attention", "one head at a time hands on the weights alone " +
                                           expected_got("no qk, scaled or scores kept", "some kept"));
    attention_options whole = options;
    whole.keep_weights = false;
    attention_result<T> r = allocate_result(q, k, v, m, whole);  // checks the shapes; the output and lse
    const std::size_t B = q.shape[0], Hq = q.shape[1], Tq = q.shape[2], Dk = q.shape[3];
    const std::size_t Hkv = k.shape[1], Tk = k.shape[2], Dv = v.shape[3], group = Hq / Hkv;
    // As attention(): one NaN or ±∞ anywhere sends the whole call to the reference kernel.
    const bool use_reference = reference || !all_finite(q) || !all_finite(k) || !all_finite(v);
    attention_options one = options;
    one.keep_weights = true;
    tensor4<T> qh = tensor4<T>::from_shape({B, 1, Tq, Dk});
    tensor4<T> kh = tensor4<T>::from_shape({B, 1, Tk, Dk});
    tensor4<T> vh = tensor4<T>::from_shape({B, 1, Tk, Dv});
    for (std::size_t h = 0; h < Hq; ++h) {
        for (std::size_t b = 0; b < B; ++b) {
            std::copy_n(q.data + (b * Hq + h) * Tq * Dk, Tq * Dk, &qh(b, 0, 0, 0));
            if (h % group == 0) {  // the kv head of query heads h … h + group − 1 (GQA)
                std::copy_n(k.data + (b * Hkv + h / group) * Tk * Dk, Tk * Dk, &kh(b, 0, 0, 0));
                std::copy_n(v.data + (b * Hkv + h / group) * Tk * Dv, Tk * Dv, &vh(b, 0, 0, 0));
            }
        }
        const mask<T> mh = head_slice(m, h, h + 1);
        one.sinks = options.sinks.empty() ? std::vector<double>{} : std::vector<double>{options.sinks[h]};
        const attention_result<T> rh = use_reference ? attention_reference(qh, kh, vh, mh, one) : attention(qh, kh, vh, mh, one);
        for (std::size_t b = 0; b < B; ++b) {
            std::copy_n(&rh.output(b, 0, 0, 0), Tq * Dv, &r.output(b, h, 0, 0));
            if (options.keep_lse) std::copy_n(&rh.lse(b, 0, 0), Tq, &r.lse(b, h, 0));
        }
        each_head(h, rh.weights);
    }
    return r;
}

template attention_result<float> attention(tensor4_view<float>, tensor4_view<float>, tensor4_view<float>,
                                           const mask<float>&, const attention_options&);
template attention_result<double> attention(tensor4_view<double>, tensor4_view<double>, tensor4_view<double>,
                                            const mask<double>&, const attention_options&);

template attention_result<float> attention_by_head(tensor4_view<float>, tensor4_view<float>, tensor4_view<float>,
                                                   const mask<float>&, const attention_options&, bool,
                                                   const std::function<void(std::size_t, const tensor4<float>&)>&);
template attention_result<double> attention_by_head(tensor4_view<double>, tensor4_view<double>, tensor4_view<double>,
                                                    const mask<double>&, const attention_options&, bool,
                                                    const std::function<void(std::size_t, const tensor4<double>&)>&);

}  // namespace attn::core
