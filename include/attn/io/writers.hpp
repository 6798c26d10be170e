#pragma once
/// \file writers.hpp
/// One entry point for every output format of `attn compute` (docs/design.md §2 Outputs);
/// the formats themselves are the registry of formats.hpp.

#include <iosfwd>
#include <string>
#include <vector>

#include "attn/io/document.hpp"
#include "attn/io/formats.hpp"
#include "attn/io/npz.hpp"
#include "attn/io/table.hpp"
#include "attn/stages.hpp"

namespace attn::io {

/// Writes `doc` in `f` (a format of the registry, formats.hpp), with its writer. npy needs
/// exactly one tensor (usage_error otherwise, naming --dump); npz holds every tensor by
/// stage name; table is laid out per `table` (colour, elision of large tensors; see
/// write_table). Throws io_error if `out` fails.
void write_document(std::ostream& out, const document& doc, format f, const text_style& style,
                    const table_options& table);

/// write_document with the default table layout (large tensors elided as NumPy prints
/// them) and 24-bit colour if `color`.
void write_document(std::ostream& out, const document& doc, format f, const text_style& style, bool color);

/// The axes of tensor `t` of `doc`, one name per dimension ("L", "B", "H", "Tq", "Tk", …;
/// "" for an axis nothing names): the ones it carries (named_array::axes, set by the
/// pipeline from the stage table), else — a document read back from a file — read from
/// `doc`'s meta, the one place that does: "L" first when meta.model.layer is "all" or a
/// list (layer_axes), then the stage's axes fitted to the rest (attn::fit_axes), heads kept
/// before the batch axis when meta "heads" > 1 and "average_heads" is false (docs/formats.md "Shapes
/// of what is written"; without meta an .npz's rank 3 is (B, Tq, Tk)). Every writer, plot
/// and the view read a tensor's layer, batch and head axes from here. Throws
/// std::logic_error when `t` carries a number of axes other than its rank.
std::vector<std::string> tensor_axes(const document& doc, const named_array& t);

/// The labels of each batch item where they differ (a checkpoint run over a batch of ids
/// or texts), B lists of T, as meta.model.tokens holds them; empty when `doc.tokens`
/// labels every item.
std::vector<std::vector<std::string>> item_tokens(const document& doc);

/// The members an .npz holds after the stages (docs/design.md §6.2), in this order:
/// `tokens` ((T,), or (B, T) of item_tokens), `tokens_kv`, `words` ((W,)) when the run has
/// them, and `meta`, the meta's JSON text as a 0-d unicode array (compact, as --compact
/// writes it). `np.load` reads them without pickle.
std::vector<npz_member> context_members(const document& doc);

/// True when `axes` (tensor_axes) start with a layer axis "L".
bool has_layer_axis(const std::vector<std::string>& axes);

/// True when the first axis of tensor `t` of `doc` after any layer axis holds heads rather
/// than batch items (tensor_axes): a rank-3 Tq×Tk stage (is_matrix of the stage table:
/// qk, scaled, scores, weights, mask), or a rank-2 per-row stage (is_row_stage), of a
/// rank-2 input split into several heads, which is (H, Tq, Tk) or (H, Tq) as in unbatched
/// nn.MultiheadAttention. The same rule as heatmap_from_document (plot.hpp), so tables,
/// CSV and plots agree.
bool leading_axis_is_heads(const document& doc, const named_array& t);

/// The one rule of which cells of tensor `t` of `doc` are masked, one flag per element,
/// for every writer (tables, CSV, plots, the HTML view) and the view's statistics; the
/// tensor's kind comes from the stage table (attn/stages.hpp):
/// - weights: the `mask` stage's False when `doc` holds one of the same shape; else a −∞
///   (or a finite meta.mask_fill) in the scores of the same shape; else every exact 0
///   (softmax gives 0 only for masked keys or complete underflow);
/// - scores: a −∞ or a finite meta.mask_fill;
/// - any other tensor: none.
/// How a masked cell is shown is the writer's: tables print a masked 0 as "·", plots and
/// the view draw masked cells grey (plots only those whose weight is 0 or NaN).
std::vector<char> masked_cells(const document& doc, const named_array& t);

/// 1 when `doc`'s meta says every tensor has a leading layer axis (a checkpoint computed
/// with `--layer all` or a list: meta.model.layer is "all" or the list of layers), else
/// 0: what tensor_axes reads for a tensor that carries no axes. CSV gives the axis a
/// `layer` column, tables label it "layer l".
std::size_t layer_axes(const document& doc);

/// The layers of a run of listed layers (`--layer 0,5,10-12`, docs/design.md §5.4):
/// meta.model.layer when it is a list of layer numbers, else empty (`--layer all`, one
/// layer, or no checkpoint). Never throws.
std::vector<std::size_t> listed_layers(const document& doc);

/// The model's layer at index `index` of the leading layer axis: meta.model.layer[index]
/// for a run of listed layers (`--layer 0,5,10-12`, docs/design.md §5.4), else `index`
/// (`--layer all`). Never throws.
std::size_t layer_number(const document& doc, std::size_t index);

/// True for the stages with one value per query row (the scores' shape without the key
/// axis): lse and the row statistics stats.entropy, max_weight, argmax, row_sum (kind
/// per_row of the stage table).
bool is_row_stage(const std::string& name);

/// True for the stages with one value per batch item and head (docs/design.md §4.4): the
/// head_stats.* tensors, (B, H), or (H,) for an input without a batch axis. CSV puts
/// their indices in `batch` and `head`; tables label them by index, never by token.
bool is_head_stage(const std::string& name);

}  // namespace attn::io
