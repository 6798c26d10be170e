#pragma once
/// \file stages.hpp
/// The stage table (docs/design.md §2 "Tensor shapes", §4.4): every stage `--dump`
/// accepts, once: its name, its axes, its kind, its dtype rule and what the view does with
/// it. The pipeline names its tensors from it, the writers, plots, tables, CSV and the
/// view recognise a tensor's kind by it, the CLI lists its choices from it. Stage names
/// are written as literals nowhere else in src/ (tests/pipeline/test_stage_table.cpp, "stage names
/// are written as literals only in the stage table's file").
/// Base floor: plain data, readable by io (which knows no attention) and by the pipeline.

#include <cstddef>
#include <string>
#include <vector>

namespace attn {

/// The stages `--dump` accepts, in pipeline order (the order of the table). `count` is not
/// a stage: it stays last and counts them, and src/stages.cpp does not compile unless its
/// table has one row per stage (as ggml's static_assert on GGML_OP_COUNT).
enum class stage { x, x_norm, q_proj, k_proj, q, k, v, qk, scaled, scores, weights, output, lse, present_key, present_value, mask, stats,
                   head_stats, rollout, word_weights, count };

/// The number of stages (the rows of the stage table).
inline constexpr std::size_t stage_count = static_cast<std::size_t>(stage::count);

/// What a stage's tensor holds, which decides how it is drawn, laid out and masked.
enum class stage_kind {
    vectors,     ///< one vector per token: (…, T, D) or merged heads (…, T, H·D)
    logits,      ///< a Tq×Tk matrix before the mask (qk, scaled)
    scores,      ///< the Tq×Tk matrix after the mask: masked cells are −∞ (or meta.mask_fill)
    weights,     ///< the Tq×Tk softmax probabilities, each row summing to 1 (or 0: masked row)
    mask,        ///< the Tq×Tk combined mask, bool, True = attend
    per_row,     ///< one value per query row: the Tq×Tk shape without the key axis
    statistics,  ///< several tensors "<name>.<part>": 0-d variances and per-row statistics
    per_head,    ///< several tensors "<name>.<part>", one value per batch item and head
    rollout,     ///< a Tq×Tk matrix across layers, one per batch item
    words,       ///< a word×word matrix (weights merged to words), labelled by the document's words
    scalar,      ///< a 0-d value (a part of `stats`)
    unknown      ///< a tensor that is not a stage (an input, a renamed array)
};

/// The element type a stage is written in.
enum class stage_dtype {
    compute,            ///< the compute dtype (--dtype, else the inputs')
    boolean,            ///< bool
    compute_and_int64,  ///< the compute dtype, except the integer parts (stats.dk, stats.argmax): int64
    float64             ///< always float64 (rollout: products of layers; word_weights: sums of weights)
};

/// One row of the stage table.
struct stage_info {
    attn::stage id;
    std::string name;   ///< as --dump and the documents spell it ("present_key")
    std::string axes;   ///< in full (B, H, …) form, before the input's layout drops B or H
                        ///< (docs/design.md §2); a `--layer all` document puts L first
    stage_kind kind;
    stage_dtype dtype;
    int drawn;          ///< the view draws it as a layer of its page: its place in the list (1 first), or 0
    bool for_view;      ///< computed for the view's page (attn view, compute --format html)
    bool proves_output; ///< a tensor of this name shows a file is attn's output, not an input
    bool per_run;       ///< made once from every layer (rollout): no layer axis in a `--layer all` document
    std::vector<std::string> parts;  ///< statistics, per_head: the tensors "<name>.<part>"
};

/// The stage table, in pipeline order.
const std::vector<stage_info>& stage_table();

/// The row of stage `s`.
const stage_info& stage_row(stage s);

/// The name of a stage ("present_key"), as --dump and the documents spell it.
const std::string& stage_name(stage s);

/// The stage called `name`. Throws usage_error("--dump", "unknown stage '…' (expected x,
/// x_norm, … or rollout)").
stage parse_stage(const std::string& name);

/// Every stage name, in table order, separated by `separator` (the last by `last`, when
/// given): "x, x_norm, …, head_stats or rollout".
std::string stage_list(const std::string& separator, const std::string& last = "");

/// The kind of the tensor called `tensor_name` in a document: a stage's kind; a part of
/// `stats` (stats.dk, .var_*: scalar; .entropy, .max_weight, .argmax, .row_sum:
/// per_row); any "head_stats.<part>" (per_head); unknown for any other name.
stage_kind tensor_kind(const std::string& tensor_name);

/// True when the tensor called `tensor_name` is made once per run from every layer (its
/// stage's per_run: rollout), so a `--layer all` document gives it no layer axis.
bool made_per_run(const std::string& tensor_name);

/// The axes of the tensor called `tensor_name` in full form: its stage's `axes`, split
/// ({"B", "H", "Tq", "Tk"} for weights, {"B", "Tk", "Hkv·D"} for k_proj); a part of
/// `stats` its own ({} for the 0-d ones, lse's {"B", "H", "Tq"} for the per-row ones);
/// any "head_stats.<part>" {"B", "H"}; empty for a name that is not a stage.
std::vector<std::string> full_axes(const std::string& tensor_name);

/// The axes of the tensor called `tensor_name` when it has rank `rank`: its full_axes
/// less those the input's layout drops (docs/design.md §2 "Tensor shapes"). The full
/// rank keeps them all. A vector stage (B, H, T, D) of a rank-3 input has its heads merged,
/// (B, T, H·D), and of a rank-2 input (T, H·D); (B, T, E) of a rank-2 input is (T, E), and
/// (B, T, H·D) of a rank-4 input (B, H, T, D) (q_proj, k_proj of 4-D inputs). A
/// Tq×Tk or per-row stage (B, H, …) one axis short lost B when `heads_kept` (several heads,
/// not averaged: (H, Tq, Tk), unbatched nn.MultiheadAttention), else H (one head or
/// averaged: (B, Tq, Tk)), and two short lost both; head_stats of rank 1 are (H). Empty
/// when `rank` fits none of these (a tensor that is not a stage, a rank-4 x): no axis is
/// guessed.
std::vector<std::string> fit_axes(const std::string& tensor_name, std::size_t rank, bool heads_kept);

/// True for the kinds that are Tq×Tk matrices of one layer: logits, scores, weights, mask,
/// and words (word_weights: Wq×Wk, laid out as weights are).
bool is_matrix(stage_kind k);

/// The name of the one stage of kind `k` (scores, weights, mask, rollout), for finding
/// it in a document. Throws std::logic_error for a kind several stages or none have.
const std::string& stage_of_kind(stage_kind k);

/// What `--dump` writes when it is not given: scores, weights, output.
std::vector<std::string> default_dump();

/// The stages the view draws as layers, in the page's order (weights, scores, scaled, qk).
std::vector<std::string> drawn_stages();

/// The stages a page needs computed: those it draws in the page's order, then the
/// others in table order (weights, scores, mask, head_stats).
std::vector<std::string> view_stages();

/// The matrix stages of one layer whose values are drawn (kinds logits, scores,
/// weights), in table order: what attn plot --stage takes.
std::vector<std::string> plot_stages();

}  // namespace attn
