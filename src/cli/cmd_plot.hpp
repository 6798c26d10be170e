#pragma once
// What `attn compute --plot FILE` borrows from `attn plot` (cmd_plot.cpp).

#include <string>
#include <vector>

#include "attn/io/document.hpp"

namespace attn::cli {

/// `dump` plus the stages a weights plot needs (weights, and scores for the masked cells).
std::vector<std::string> with_plot_stages(std::vector<std::string> dump);

/// Checks `--plot FILE` before any work: a known image extension, and not a batch run
/// (several inputs, a manifest, -o DIR/). Throws usage_error.
void check_plot_option(const std::string& path, bool batch);

/// Writes the heatmap of the weights of batch 0, head 0 of `doc` to `path`, then drops
/// from `doc` the stages that were only computed for the plot (not in `dump`).
void plot_weights(io::document& doc, const std::string& path, const std::vector<std::string>& dump);

}  // namespace attn::cli
