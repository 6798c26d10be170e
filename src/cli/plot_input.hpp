#pragma once
// What `attn plot`, `attn view` and `attn compute --plot FILE` share (plot_input.cpp): no
// subcommand file includes another's header.

#include <string>
#include <vector>

#include "attn/io/document.hpp"
#include "attn/io/input.hpp"
#include "attn/io/plot.hpp"
#include "pipeline_cli.hpp"

namespace attn::cli {

/// `dump` plus the stages a weights plot needs (weights, and scores for the masked cells).
std::vector<std::string> with_plot_stages(std::vector<std::string> dump);

/// Checks `--plot FILE` before any work: a known image extension, and not a batch run
/// (several inputs, a manifest, -o DIR/). Throws usage_error.
void check_plot_option(const std::string& path, bool batch);

/// Writes the heatmap of the weights of batch 0, head 0 of `doc` to `path`, then drops
/// from `doc` the stages that were only computed for the plot (not in `dump`).
void plot_weights(io::document& doc, const std::string& path, const std::vector<std::string>& dump);

/// Keeps one layer of a document whose Tq×Tk stages (qk, scaled, scores, weights, mask)
/// have a leading layer axis: meta.model.layer is "all" (`compute CHECKPOINT --layer
/// all`) or a list of layers (`--layer 0,5,10-12`), a stage has rank 5 (L, B, H, Tq, Tk),
/// or `doc` has no meta (an .npz) and `layer` is given. `layer` is N, "last" or -K from
/// the end; empty picks the first. With a list, N is the model's layer N and must be
/// listed. The stages lose their first axis (other tensors are dropped),
/// meta.model.layer (or meta.layer) becomes the layer picked and meta.heads is set for
/// an (H, Tq, Tk) result. Throws usage_error ("--layer: out of range (expected 0 to L-1
/// or -L to -1, got X)", "--layer: not a layer of SOURCE (expected one of the layers it
/// was computed for, 0,5, or last or -K, got 3)", or a `layer` given for a document
/// without a layer axis, named by `source`).
void select_layer(io::document& doc, const std::string& layer, const std::string& source);
/// plot_weights without the writing: the heatmap to write once the run's other output
/// is written, so that a run whose -o fails leaves no plot behind.
io::heatmap_spec plot_of_weights(io::document& doc, const std::vector<std::string>& dump);

/// What INPUT turned out to be: attn's own output (`doc`), one array to draw as it is
/// (`lone`), or a compute input (`inputs`).
struct loaded {
    bool is_output = false;
    bool is_lone = false;
    io::named_array lone;  // name: the array's, or the .npy file's
    io::document doc;
    io::bundle inputs;
};

/// Reads INPUT once (it may be stdin) and tells attn output from a compute input: a JSON
/// object with "meta", or an .npz holding stages only attn writes (weights, scores, …).
/// A lone array is drawn as it is. Throws io_error / format_error / value_error.
loaded load_input(const std::string& path);

/// Per-tensor options (--q, --x, …) replace a bundle's array of the same name, as in compute.
void add_tensor_options(io::bundle& b, const pipeline_cli& c);

/// The file name of `path` without its folders, the name a lone array is drawn under;
/// "array" for stdin ("-").
std::string base_name(const std::string& path);

/// A checkpoint, which --layer computes over, rather than attn output, from which --layer
/// picks a layer: .safetensors or its .index.json (what checkpoint runs read), or a model
/// directory holding one.
bool is_checkpoint_path(const std::string& path);

}  // namespace attn::cli
