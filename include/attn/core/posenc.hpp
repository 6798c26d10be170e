#pragma once
/// \file posenc.hpp
/// Sinusoidal positional encodings (Vaswani et al. 2017, "Attention Is All You Need",
/// §3.5): PE(p, 2i) = sin(p / base^(2i/D)), PE(p, 2i+1) = cos(p / base^(2i/D)),
/// base = 10000 in the paper.

#include <cstddef>
#include <string>
#include <vector>

namespace attn::core {

/// Where the sines and cosines go along the model axis (D even, i < D/2).
/// interleaved: PE[p, 2i] = sin(p·ωᵢ), PE[p, 2i+1] = cos(p·ωᵢ) — the paper's formula.
/// concat: PE[p, i] = sin(p·ωᵢ), PE[p, D/2 + i] = cos(p·ωᵢ) — tensor2tensor's
/// `get_timing_signal_1d` layout (sines, then cosines).
/// In both, ωᵢ = base^(−2i/D).
enum class posenc_style { interleaved, concat };

/// "interleaved" or "concat" → style. Throws usage_error (source "`posenc`") otherwise.
posenc_style parse_posenc_style(const std::string& name);

/// "interleaved" or "concat".
const char* posenc_style_name(posenc_style style);

/// The (length, dim) encodings of positions first, …, first + length − 1, row-major,
/// computed in double: angle = p / base^(2i/D), then sin/cos.
/// Throws value_error (source "posenc") when dim is odd or zero, or base is not a
/// finite number > 0.
std::vector<double> positional_encoding(std::size_t length, std::size_t dim, posenc_style style,
                                        double base = 10000.0, std::size_t first = 0);

}  // namespace attn::core
