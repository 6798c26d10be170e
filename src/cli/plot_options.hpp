#pragma once
// The parsers of the plot options --size, --dpi, --vmin and --vmax (cmd_plot.cpp).

#include <optional>
#include <string>

#include "attn/io/plot.hpp"

namespace attn::cli {

/// Parses `--size`: "WxH" (or "WXH") with W and H whole numbers of pixels from 1 to
/// io::plot_units::max_side, e.g. "800x600". Throws usage_error with source "--size", e.g.
/// "--size: not WIDTHxHEIGHT (expected two whole numbers of pixels like 800x600, got 800)",
/// "--size: not positive (expected 1 to 16384 pixels per side, got 0x600)" or
/// "--size: too large (expected 1 to 16384 pixels per side, got 20000x600)".
io::figure_size parse_figure_size(const std::string& text);

/// Parses `--dpi`: a number of dots per inch, 1 ≤ N ≤ io::plot_units::max_dpi (decimals
/// allowed). Throws usage_error with source "--dpi", e.g.
/// "--dpi: not a resolution (expected a number of dots per inch from 1 to 1200, got 0)".
double parse_dpi(const std::string& text);

/// Parses `--vmin` / `--vmax` (`option` is the source of errors): "auto" gives nullopt,
/// meaning the data's minimum / maximum, a finite number gives itself. Throws
/// usage_error, e.g. "--vmax: not a number (expected a finite number or auto, got abc)"
/// or "--vmax: not a finite number (expected a finite number, got inf)".
std::optional<double> parse_color_limit(const std::string& option, const std::string& text);

}  // namespace attn::cli
