// The plot options' parsers (plot_options.hpp).
#include "plot_options.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "attn/error.hpp"

namespace attn::cli {

io::figure_size parse_figure_size(const std::string& text) {
    const std::size_t x = text.find_first_of("xX");
    const auto whole = [](const std::string& t, long& v) {
        if (t.empty() || t.size() > 9) return false;
        const std::size_t i = t[0] == '-' ? 1 : 0;  // a sign only to say "not positive"
        if (i == t.size() || t.find_first_not_of("0123456789", i) != std::string::npos) return false;
        v = std::stol(t);
        return true;
    };
    long w = 0, h = 0;
    if (x == std::string::npos || !whole(text.substr(0, x), w) || !whole(text.substr(x + 1), h))
        throw usage_error("--size", "not WIDTHxHEIGHT " + expected_got("two whole numbers of pixels like 800x600", text));
    if (w < 1 || h < 1) throw usage_error("--size", "not positive " + expected_got("1 to 16384 pixels per side", text));
    if (w > io::plot_units::max_side || h > io::plot_units::max_side)
        throw usage_error("--size", "too large " + expected_got("1 to 16384 pixels per side", text));
    return {static_cast<int>(w), static_cast<int>(h)};
}

double parse_dpi(const std::string& text) {
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(v >= 1 && v <= io::plot_units::max_dpi))
        throw usage_error("--dpi", "not a resolution " + expected_got("a number of dots per inch from 1 to 1200", text));
    return v;
}

std::optional<double> parse_color_limit(const std::string& option, const std::string& text) {
    if (text == "auto") return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || std::isspace(static_cast<unsigned char>(text[0])))
        throw usage_error(option, "not a number " + expected_got("a finite number or auto", text));
    if (!std::isfinite(v)) throw usage_error(option, "not a finite number " + expected_got("a finite number", text));
    return v;
}

}  // namespace attn::cli
