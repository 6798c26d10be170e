#pragma once
/// \file html.hpp
/// `attn view` and `compute --format html` (docs/design.md §4.4): one standalone HTML page that
/// shows a document's Tq×Tk stages per layer, batch item and head — a heatmap with
/// token labels, a bertviz-style line view, an all-heads grid and a sortable table of
/// head statistics. No network: the script and styles are inline, the data is in the page
/// (each stage's layers as deflated, base64-encoded blocks, then a JSON block of what it
/// shows), and a Content-Security-Policy forbids every fetch.

#include <cstddef>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "attn/io/document.hpp"

namespace attn::io {

/// Bits per value the page stores (its rollout too) for `cells` Tq×Tk stage values in all:
/// 16 up to 16 Mi cells, else 8 (so a 12-layer × 12-head T=512 view stays small).
int view_bits(std::size_t cells);

/// The bytes of stage data the page will embed before compression (cells × bits/8, all
/// stages and the rollout it shows), to check against --max-bytes before any work.
/// Throws value_error(source, "no Tq×Tk stage to view (expected weights, scores, scaled
/// or qk; found …)") when `doc` holds none, shape_error for a stage whose rank does not
/// fit (2 to 4, plus a layer axis).
std::size_t view_data_bytes(const document& doc, const std::string& source);

/// Writes the page. Each layer of each stage is quantised linearly over that layer's
/// finite range (weights over [0, 1]) to view_bits levels, its colours spanning the
/// stage's range over every layer, the top code meaning masked (a −∞ score, the `mask`
/// stage's False, an exact 0 of word_weights, or a non-finite value), deflated (zlib) and base64-encoded; the page
/// states the quantisation. `head_stats.*` tensors in `doc` fill the head table. A
/// `rollout` tensor ((T, T) or (B, T, T), of the weights' batch and size) is shown as one
/// more layer of the weights, the same for every head; its exact zeros (keys
/// that no path through the layers reaches) are drawn as masked.
/// Throws as view_data_bytes, io_error when `out` fails.
void write_html(std::ostream& out, const document& doc, const std::string& source);

/// One INPUT of a page of several (`attn view A B …`, docs/design.md §5.4): its name as
/// given (the page's selector shows it; "<stdin>" for "-") and its document, not owned.
struct view_input {
    std::string name;
    const document* doc = nullptr;
};

/// view_data_bytes of a page of several inputs: every input's stages and rollout, all
/// stored at one depth, view_bits of all their cells together. One input: exactly
/// view_data_bytes(*doc, name). Throws as view_data_bytes, naming the input at fault.
std::size_t view_data_bytes(const std::vector<view_input>& inputs);

/// Writes one page of several inputs: its data block lists each input's data (stages,
/// rollout, head_stats, tokens, … as the page of one input holds them, with its "name")
/// under "inputs", quantised at the depth of view_bits over all of them; a selector
/// (#input) switches the page between them, and each input's settings (<dl class="meta">)
/// show with it. One input: exactly write_html(out, *doc, name), no selector.
/// Throws as view_data_bytes, io_error when `out` fails.
void write_html(std::ostream& out, const std::vector<view_input>& inputs);

/// The page of a run of several layers written as the layers come (docs/design.md §5.4,
/// `attn compute CHECKPOINT --layer all --format html`): the head and each layer's chunks
/// at once, the rest (rollout, head statistics, settings, script) at finish(). The bytes
/// are write_html's of the held run's document. Holds one layer's stages while it encodes
/// them and the page's records (a range per stage and layer, the head statistics rows).
class html_stream {
public:
    /// A page titled `source` to `out`. `rollout_asked`: the run dumps rollout, which the
    /// page then shows even of one layer (add_rollout makes none of one layer).
    html_stream(std::ostream& out, std::string source, bool rollout_asked);
    ~html_stream();
    html_stream(const html_stream&) = delete;
    html_stream& operator=(const html_stream&) = delete;

    /// Writes the viewed stages of `layer` (a layer's document, as checkpoint_options::
    /// each_layer hands it, without the layer axis), the next of `count`; the first writes
    /// the page's head and fixes its depth (view_bits of count layers). Throws
    /// value_error("no Tq×Tk stage to view …") when the first layer has none, shape_error
    /// when a layer's stages differ from the first's ("does not continue its streamed
    /// page") or come after the last, io_error("", …) when `out` fails.
    void append(const document& layer, std::size_t count);

    /// The next layer of a page whose one viewed stage is weights without scores or a mask
    /// (one array viewed as weights), given in pieces, so that not even a layer is held:
    /// begin_layer takes the layer's document as append does, its weights' shape without
    /// their data; add_cells the next `n` cells in C order, elements [begin, begin + n) of `piece` (their exact zeros masked, as
    /// masked_cells marks lone weights, and every non-finite value), quantised over [0, 1]
    /// and encoded as they come; end_layer, once every cell came, `stats` (the layer's
    /// head_stats.* tensors, as append reads them from its layer). The bytes are append's
    /// of the whole layer. Throw as append does; value_error for a layer of another stage
    /// or with scores or a mask; shape_error for cells beyond the layer's or too few.
    void begin_layer(const document& layer, std::size_t count);
    void add_cells(const array& piece, std::size_t begin, std::size_t n);
    void end_layer(const document& stats);

    /// Writes the rest of the page from `run`, the run's document (its meta, labels and
    /// rollout; its stages were appended). Throws shape_error when fewer than `count`
    /// layers came ("streamed in part"), io_error("", …) when `out` fails.
    void finish(const document& run);

private:
    std::vector<const named_array*> start_layer(const document& layer, std::size_t count);
    void end_layer_rows(const document& layer);
    struct impl;
    std::unique_ptr<impl> p_;
};

}  // namespace attn::io
