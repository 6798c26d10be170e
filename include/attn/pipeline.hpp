#pragma once
/// \file pipeline.hpp
/// The whole of `attn compute` as one library call (docs/design.md §1), and the one place where
/// core/ (attention numerics) and io/ (files and formats) meet: named input arrays →
/// Q, K, V (projection, heads, KV cache; src/pipeline/inputs) → masks (core/masks) →
/// attention (core/attention or core/reference) → the dumped stages in the input's
/// layout with a `meta` block of every setting used (src/pipeline/stages, compute).
///
/// Its GEMMs run in OpenBLAS, whose kernels are chosen when it loads: a program linking
/// attn::core sets OPENBLAS_CORETYPE before it starts, or calls
/// core::select_blas_core(argv) first in main, so that a CPU OpenBLAS does not know still
/// gets its own kernels (attn/core/blas_core.hpp; core::blas_core() reports a mismatch).

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "attn/core/attention_call.hpp"
#include "attn/core/blas_core.hpp"
#include "attn/core/masks.hpp"
#include "attn/core/rope.hpp"
#include "attn/core/rope_scaling.hpp"
#include "attn/core/posenc.hpp"
#include "attn/core/projection.hpp"
#include "attn/core/softmax.hpp"
#include "attn/io/document.hpp"
#include "attn/model/config.hpp"
#include "attn/stages.hpp"

namespace attn {

/// Every stage name `--dump` accepts, in pipeline order.
const std::vector<std::string>& stage_names();

/// Which kernel computes the attention: the fast one (attention.hpp) or the plain
/// double-precision loops (reference.hpp), to cross-check the fast path on real data.
enum class kernel_kind { fast, reference };

/// Settings of a compute run; defaults are those of docs/design.md §1 and §2. The
/// attention call's own (scale, softcap, masked rows, RoPE, every mask and bias) are its
/// `attention`; the rest say how inputs become Q, K, V and what is written.
struct pipeline_options {
    core::attention_call attention;          ///< the call: scale, softcap, masked rows, RoPE, masks

    std::size_t heads = 0, kv_heads = 0;     ///< 0: not given (1, and = heads)
    core::weight_layout layout = core::weight_layout::out_in;
    std::optional<dtype> compute_type;       ///< f4 or f8; default from the inputs
    std::vector<std::string> dump = default_dump();  ///< the stage table's default (attn/stages.hpp)
    bool average_heads = false;
    std::vector<std::string> tokens;         ///< overrides a bundle's tokens
    std::vector<std::string> tokens_kv;      ///< labels of the keys (cross-attention), past keys included
    /// Sinusoidal encodings (posenc.hpp) added to X and X_kv before the projections,
    /// over the sequence axis, each from position 0 (X from the past length when a KV
    /// cache is given and there is no X_kv). Needs X of rank 2 or 3.
    std::optional<core::posenc_style> posenc;
    /// A query temperature applied after RoPE (and without RoPE) to Q, row by position
    /// (past length + index); part of the q stage. beta 0: none (a checkpoint family sets it).
    core::query_temperature q_temperature;
    double posenc_base = 10000.0;
    int threads = 0;
    kernel_kind kernel = kernel_kind::fast;
    /// Rank-3 x, x_kv, q, k, v are (T, B, E) (nn.MultiheadAttention with batch_first=False);
    /// the q, k, v and output stages are returned (T, B, ·) too.
    bool seq_first = false;
    /// The layout x, x_kv, q, k, v are declared in (--layout): `by_rank` reads rank 4 as
    /// (B, H, T, D) and rank 2 or 3 as (T, E) or (B, T, E); the others require that rank.
    /// `bthd` is (B, T, H, D) (FlashAttention, Hugging Face before the transpose): the
    /// q, k, v, x and output stages are returned (B, T, H, D) too. `tbe` is seq_first.
    enum class input_layout { by_rank, bhtd, bthd, bte, tbe } layout_of_inputs = input_layout::by_rank;
    /// Token ids (T,) given inline (`--ids 3,1,4`): the token_ids array, which must not
    /// also be given. With an `embedding` table (V, E) they give X = E[ids].
    std::vector<long long> ids;
    /// head_stats (docs/design.md §4.4): the sink mass is the weight on the first sink_k keys (1 to Tk).
    std::size_t sink_k = 1;
    /// Layers whose stages the run holds together (a checkpoint run with --layer all): the
    /// Tq×Tk stages planned against --max-bytes (io::max_array_bytes) are this many times
    /// one layer's, twice over when above 1 (the layers, then their stack).
    std::size_t planned_layers = 1;
    /// Set by a checkpoint run whose rollout or word_weights read the weights and keep
    /// none (docs/design.md §5.4): compute() then runs the heads one at a time
    /// (core::attention_by_head) and hands each head's weights, (B, 1, Tq, Tk) in the
    /// compute dtype and valid during the call, to this function, with the head's index
    /// among the call's Hq heads;
    /// the document holds no weights. head_stats beside it is made head by head. compute()
    /// throws usage_error("--dump", …) when it is set with weights, qk, scaled, scores or
    /// stats dumped, or with average_heads.
    std::function<void(std::size_t head, std::size_t heads, const array& weights)> each_head_weights;
};

/// Runs the pipeline on `inputs` (names as in docs/design.md §2, lower case; unknown names
/// ignored), taking them by value so that each is freed once converted. Returns the document the writers print: meta, tokens and the dumped
/// stages in `options.dump` order, each in the input's layout (docs/design.md §2 "Tensor shapes").
/// Throws value_error / shape_error for inputs that do not fit together, usage_error
/// for options that contradict the inputs (e.g. `--mask padding` with no padding source),
/// limit_error when the Tq×Tk stages it would hold exceed io::max_array_bytes() ("this run
/// needs about … for its Tq×Tk stages (…) (expected at most --max-bytes …; raise
/// --max-bytes or dump fewer stages)"), before they are allocated.
io::document compute(std::vector<named_array> inputs, const std::vector<std::string>& bundle_tokens,
                     const pipeline_options& options);

/// Throws limit_error("", "<what> needs about 14.4 GB for its Tq×Tk stages (<sizes>)
/// (expected at most --max-bytes 1 GiB; <remedy>)") when the `bytes` a run plans to hold
/// for its Tq×Tk stages exceed io::max_array_bytes(): --max-bytes bounds what a run
/// computes, not only what it reads. The estimate is printed in powers of 1000 with one
/// decimal, the limit as --max-bytes takes it (powers of 1024). `what` names the run
/// ("this run", "this view"), `sizes` its dimensions.
void check_planned_bytes(double bytes, const std::string& what, const std::string& sizes, const std::string& remedy);

/// A checkpoint run (docs/design.md §4.3): which model, which layer, where its settings are.
struct checkpoint_options {
    std::string path;                   ///< a .safetensors file or a *.safetensors.index.json
    std::string config;                 ///< config.json; "" = the one beside the checkpoint
    std::optional<model::arch> arch;    ///< --arch; default from config.json's model_type
    std::optional<std::size_t> layer;   ///< --layer N; nullopt = `layers`, or all layers (--layer all)
    /// --layer 0,5,10-12 (docs/design.md §5.4), used when `layer` is unset: the listed
    /// layers, ascending, each once; empty = all layers. Stacked along a leading layer
    /// axis in this order, as all layers are.
    std::vector<std::size_t> layers;
    std::string vocab;                  ///< --vocab: --tokenizer's alias (docs/design.md §5.3), "" = none
    /// tokenizer.json that encodes `texts` and labels the tokens by its decoder (include/
    /// attn/pipeline/text.hpp); "" = the tokenizer.json beside the checkpoint when texts
    /// are given.
    std::string tokenizer;
    /// Texts in (docs/design.md §5.3): encoded into token_ids (one text: (T,); several:
    /// (B, T) right-padded, with the attention_mask the padding implies).
    std::vector<std::string> texts;
    bool add_special_tokens = true;     ///< as `tokenizer(text)` (add_special_tokens=True)
    /// Word-level attention (`--words`, docs/design.md §5.3): adds the stage word_weights,
    /// the weights merged to the texts' words (word_weights_of), to the dump.
    bool words = false;
    /// Streamed output (docs/design.md §5.4): when set, a run of listed or all layers
    /// hands each listed layer's stages to this function as soon as the layer is computed,
    /// then frees them, instead of holding and stacking every layer. `layer` holds that
    /// layer's stages without the layer axis, named and ordered as the stacked document's,
    /// and the meta --layer N gives that layer (meta.model.layer = N, meta.shapes without
    /// the layer axis, its word labels): the document a --layer N run returns. `index`
    /// counts the listed layers from 0 and `count` is their number (the leading axis).
    /// compute_checkpoint then returns the run's meta (shapes with the layer axis) and
    /// labels and no tensors, and plans --max-bytes for one layer. Not used for --layer N
    /// (one layer is the document). Rollout, made from every layer, is in the returned
    /// document (the page of attn view shows it after the layers).
    std::function<void(io::document& layer, std::size_t index, std::size_t count)> each_layer;
};

/// Attention of a checkpoint's layer (or of listed layers, or of every layer), docs/design.md
/// §4.3 and §5.4. Inputs: either token ids (`token_ids` (T,) or (B, T), or options.ids) →
/// the family's embeddings, then blocks 0..N−1; or `x` (T, E) / (B, T, E), the residual
/// stream entering layer N, the first listed (HF hidden_states[N]). Blocks between listed
/// layers run; every block runs with the stages of options.dump, so a listed layer is
/// bitwise the same slice of an all-layers run. An `attention_mask` (B, T) (HF: 1 =
/// attend) is passed on.
/// The family's settings (heads, kv heads, causal, RoPE, sliding window, projections)
/// come from config.json; the options' heads, kv_heads, window, rope_theta and
/// rotary_dim override them when set. Stages are those of compute() plus `x` (layer
/// input) and `x_norm` (after the pre-attention norm); with a list or all layers every
/// stage has a leading layer axis, the layers ascending. meta gains "model": {arch,
/// model_type, checkpoint, layer (N, the list, or "all"), layers (the model's count)}.
/// A hybrid's layers without softmax attention (model::config::mixer_types, docs/design.md
/// §6.1) run but have no stages: all layers are its attention layers, and meta.model.layer
/// lists them.
/// Throws value_error / format_error / io_error for the checkpoint, its config or the
/// inputs (a model without an attention layer), usage_error for options that do not fit
/// it (--layer out of range or of a layer without attention, x with
/// --layer all, rollout with N or a list, ids and x both given, texts with ids or x).
/// With texts, the ids and the padding mask come from the tokenizer (encode_texts), the
/// token labels from its decoder, and meta.model gains "text": {add_special_tokens,
/// lengths, pad_id, ids (per text, before padding), words (with word_weights), tokenizer}; a missing tokenizer is an io_error naming where it was
/// looked for.
io::document compute_checkpoint(const checkpoint_options& checkpoint, std::vector<named_array> inputs,
                                const std::vector<std::string>& bundle_tokens, const pipeline_options& options);

/// `attn rope` (the ONNX RotaryEmbedding operator, opset 23): RoPE on the one array `x`
/// of `inputs`, (B, H, T, D), or (B, T, H·D) / (T, H·D) split head-major into
/// options.heads (default 1), with the positions and angles of compute's --rope
/// (position_ids, rope_cos/rope_sin, or theta; options.rope, default half). Returns Y in
/// x's layout and dtype class (float32 for float16/32 inputs, float64 for float64).
/// Throws value_error / shape_error / usage_error.
array rotate(std::vector<named_array> inputs, const pipeline_options& options);

}  // namespace attn
