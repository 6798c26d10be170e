#pragma once
/// \file generate.hpp
/// Seeded standard-normal inputs for demos, tests and benchmarks (`attn generate`).
/// The same seed gives the same numbers on every conforming C++ implementation up to
/// the last bit of std::log (see normal_stream), hence the same bytes in the files.

#include <cstdint>
#include <random>
#include <vector>

#include "attn/tensor.hpp"

namespace attn::core {

/// Standard normal numbers: std::mt19937_64 (whose output sequence the C++ standard
/// fixes, [rand.predef]) turned into normals by Marsaglia's polar method (Marsaglia &
/// Bray 1964): u, v uniform in [−1, 1) from the top 53 bits of two raw outputs each,
/// rejected unless 0 < s < 1 where s = u² + v² = fma(u, u, v·v) (rounded once, the same
/// with or without FMA hardware), then u·m and v·m with m = √(−2·ln s / s), the
/// second kept for the next call. std::normal_distribution is avoided on purpose: its
/// algorithm is implementation-defined, so libstdc++ and libc++ give different numbers.
class normal_stream {
public:
    explicit normal_stream(std::uint64_t seed) : engine_(seed) {}
    double next();

private:
    double uniform();  ///< [−1, 1), a multiple of 2^−52
    std::mt19937_64 engine_;
    double spare_ = 0;
    bool has_spare_ = false;
};

/// What to generate. Shapes use PyTorch SDPA's L (= Tq) and S (= Tk).
struct generate_options {
    std::size_t len = 0;      ///< L, query length (> 0)
    std::size_t len_kv = 0;   ///< S, key/value length; 0 = L
    std::size_t dk = 0;       ///< head width of q and k; with embed and weights, 0 = E/H
    std::size_t dv = 0;       ///< head width of v; 0 = dk
    std::size_t batch = 0;    ///< B; 0 = no batch axis
    std::size_t heads = 0;    ///< H; 0 = not given (1)
    std::size_t embed = 0;    ///< E; 0 = generate q, k, v directly
    bool weights = false;     ///< with embed: also w_q, w_k, w_v
    std::uint64_t seed = 0;
    dtype type = dtype::f4;   ///< f4 or f8
};

/// Generates the arrays, drawing one normal_stream(seed) in the order listed, each
/// array in C order:
/// - without embed: q (L, Dk), k (S, Dk), v (S, Dv); with batch: (B, L, Dk) …; with
///   heads: (B, H, L, Dk) … (B = 1 without batch) — 4-D, so that the head count travels
///   with the file and `attn compute` needs no --heads;
/// - with embed: x (L, E) or (B, L, E), x_kv likewise when S ≠ L, and with weights
///   w_q (H·Dk, E), w_k (H·Dk, E), w_v (H·Dv, E) in PyTorch's (out, in) layout, drawn
///   as N(0, 1/E) (standard normals times 1/√E, LeCun initialisation) so that the
///   projections have variance ≈ 1 like X — the premise of the 1/√Dk scale.
/// Values are computed in double and rounded to `type`.
/// Throws usage_error (source: the option, e.g. "`len`") for a zero length or width,
/// --heads/--dk/--dv with embed but without weights, E not divisible by H when Dk is
/// left to default, or more than 2^31 elements in all.
std::vector<named_array> generate_inputs(const generate_options& options);

}  // namespace attn::core
