#include "attn/core/posenc.hpp"

#include <cmath>
#include <cstdio>

#include "attn/error.hpp"
#include "attn/text.hpp"

namespace attn::core {

posenc_style parse_posenc_style(const std::string& name) {
    if (name == "interleaved") return posenc_style::interleaved;
    if (name == "concat") return posenc_style::concat;
    throw usage_error("`posenc`", "unknown style " + expected_got("interleaved or concat", "'" + name + "'"));
}

const char* posenc_style_name(posenc_style style) {
    return style == posenc_style::interleaved ? "interleaved" : "concat";
}

std::vector<double> positional_encoding(std::size_t length, std::size_t dim, posenc_style style, double base,
                                        std::size_t first) {
    if (dim == 0 || dim % 2 != 0)
        throw value_error("posenc", "the model width must be even and positive " +
                                        expected_got("an even D", std::to_string(dim)));
    if (!(base > 0) || !std::isfinite(base)) {
        throw value_error("posenc", "the base must be a finite number > 0 " + expected_got("> 0", general_number(base)));
    }
    const std::size_t half = dim / 2;
    // p / base^(2i/D) exactly as the paper writes it (a division, not p·base^(−2i/D)).
    std::vector<double> divisor(half);
    for (std::size_t i = 0; i < half; ++i)
        divisor[i] = std::pow(base, 2.0 * static_cast<double>(i) / static_cast<double>(dim));
    std::vector<double> pe(length * dim);
    for (std::size_t r = 0; r < length; ++r) {
        const double p = static_cast<double>(first + r);
        double* row = pe.data() + r * dim;
        for (std::size_t i = 0; i < half; ++i) {
            const double angle = p / divisor[i];
            if (style == posenc_style::interleaved) {
                row[2 * i] = std::sin(angle);
                row[2 * i + 1] = std::cos(angle);
            } else {
                row[i] = std::sin(angle);
                row[half + i] = std::cos(angle);
            }
        }
    }
    return pe;
}

}  // namespace attn::core
