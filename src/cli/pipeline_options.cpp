// Options shared by the subcommands that run the pipeline.
#include "diagnostics.hpp"
#include "pipeline_options.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <iostream>
#include <sstream>

#include "attn/error.hpp"

namespace attn::cli {

namespace {

/// Per-tensor options: option name → input name (docs/design.md §2, Inputs).
const std::vector<std::pair<std::string, std::string>>& tensor_options() {
    static const std::vector<std::pair<std::string, std::string>> table{
        {"q", "q"},           {"k", "k"},
        {"v", "v"},           {"x", "x"},
        {"x-kv", "x_kv"},     {"wq", "w_q"},
        {"wk", "w_k"},        {"wv", "w_v"},
        {"bq", "b_q"},        {"bk", "b_k"},
        {"bv", "b_v"},        {"wo", "w_o"},
        {"bo", "b_o"},        {"in-proj-weight", "in_proj_weight"},
        {"in-proj-bias", "in_proj_bias"}, {"attn-mask", "attn_mask"},
        {"key-padding-mask", "key_padding_mask"}, {"attention-mask", "attention_mask"},
        {"token-ids", "token_ids"},       {"embedding", "embedding"},
        {"alibi-slopes", "alibi_slopes"}, {"document-ids", "document_ids"},
        {"sinks", "sinks"},               {"position-ids", "position_ids"},
        {"rope-cos", "rope_cos"},         {"rope-sin", "rope_sin"},
        {"past-key", "past_key"},           {"past-value", "past_value"}};
    return table;
}

double parse_fill(const std::string& text) {
    if (text == "-inf" || text == "-Infinity") return -std::numeric_limits<double>::infinity();
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || std::isnan(v) || v > 0)
        throw usage_error("--mask-fill", "not a number ≤ 0 " + expected_got("-inf or a number like -1e9", text));
    return v;
}

/// "1048576", "512K", "512M", "2G", "1T" (also "2GiB", "2gb"): bytes, suffixes in powers
/// of 1024 as in coreutils and CLI11's AsSizeValue, which accepts negative numbers.
std::size_t parse_size(const std::string& option, const std::string& text) {
    std::size_t n = 0;
    const char* end = text.data() + text.size();
    const auto [p, ec] = std::from_chars(text.data(), end, n);
    std::string unit(p, end);
    for (auto& ch : unit) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (unit.size() > 1 && unit.back() == 'b') unit.pop_back();
    if (unit.size() > 1 && unit.back() == 'i') unit.pop_back();
    const std::string units = "kmgtpe";
    const std::size_t power = unit.empty() || unit == "b" ? 0 : unit.size() == 1 ? units.find(unit[0]) + 1 : 0;
    std::size_t bytes = n;
    bool ok = ec == std::errc() && p != text.data() && (unit.empty() || unit == "b" || power != 0);
    for (std::size_t i = 0; ok && i < power; ++i) ok = !__builtin_mul_overflow(bytes, std::size_t{1024}, &bytes);
    if (!ok)
        throw usage_error(option, "not a size " + expected_got("a number of bytes, or with K, M, G or T like 512M", text));
    return bytes;
}

std::string join(const std::vector<std::string>& items, const char* separator) {
    std::string s;
    for (const auto& i : items) s += (s.empty() ? "" : separator) + i;
    return s;
}

std::vector<std::string> split_words(const std::string& text) {
    std::istringstream in(text);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    return words;
}

/// The text of a bad value, quoted so that an empty one shows: 'abc', ''.
std::string in_quotes(const std::string& text) { return "'" + text + "'"; }

/// True when all of `text` is a whole number in `value` (no sign for unsigned types).
template <class T>
std::errc whole_number(const std::string& text, T& value) {
    const char* end = text.data() + text.size();
    const auto [p, ec] = std::from_chars(text.data(), end, value);
    if (ec == std::errc::result_out_of_range) return ec;
    return ec == std::errc() && p == end && !text.empty() ? std::errc() : std::errc::invalid_argument;
}

/// CLI11 converts "-1" to a size_t by wrapping it to 2^64 − 1, and a count too large for
/// 64 bits to 2^64 − 1, and reports "abc" or "1e30" as "Could not convert": counts refuse
/// a sign, anything but digits and anything over 2^63 − 1, quoting the text.
const CLI::Validator non_negative_count(
    [](std::string& text) {
        if (text.find('-') != std::string::npos) return "not a count " + expected_got("a whole number ≥ 0", text);
        long long n = 0;
        const std::errc ec = whole_number(text, n);
        if (ec == std::errc::result_out_of_range)
            return "too large " + expected_got("at most " + std::to_string(std::numeric_limits<long long>::max()), text);
        if (ec != std::errc()) return "not a whole number " + expected_got("a whole number ≥ 0", in_quotes(text));
        return std::string();
    },
    "");

/// A whole number for a --window side (pipeline_settings refuses those below −1, the
/// unbounded side, naming the whole LEFT,RIGHT).
const CLI::Validator window_side(
    [](std::string& text) {
        long long n = 0;
        const std::errc ec = whole_number(text, n);
        if (ec == std::errc::invalid_argument)
            return "not a whole number " + expected_got("a whole number ≥ -1 (-1: unbounded)", in_quotes(text));
        if (ec != std::errc())
            return "too large " + expected_got("at most " + std::to_string(std::numeric_limits<long long>::max()), text);
        return std::string();
    },
    "");

/// Any whole number that fits 64 bits (--pad-id).
const CLI::Validator any_whole_number(
    [](std::string& text) {
        long long n = 0;
        const std::errc ec = whole_number(text, n);
        if (ec == std::errc::invalid_argument) return "not a whole number " + expected_got("a whole number", in_quotes(text));
        if (ec != std::errc())
            return "out of range " + expected_got("a whole number of at most 64 bits", text);
        return std::string();
    },
    "");

/// The token ids of `--ids` from all the words given to it: "3,1,4", "3 1 4" (one word
/// or several), "[3, 1, 4]" (a JSON list). Ids are whole numbers from 0 to 2^63 − 1,
/// refused with the text as given (a number too large for 64 bits is not rounded).
std::vector<long long> parse_ids(const std::vector<std::string>& words) {
    std::string text;
    for (const auto& w : words) text += (text.empty() ? "" : " ") + w;
    const std::string expected = "token ids like 3,1,4 or '3 1 4' or '[3, 1, 4]'";
    std::string list = text;
    const std::size_t first = list.find_first_not_of(" \t"), last = list.find_last_not_of(" \t");
    list = first == std::string::npos ? "" : list.substr(first, last - first + 1);
    if (!list.empty() && (list.front() == '[' || list.back() == ']')) {
        if (list.size() < 2 || list.front() != '[' || list.back() != ']')
            throw usage_error("--ids", "not a list " + expected_got(expected, in_quotes(text)));
        list = list.substr(1, list.size() - 2);
    }
    std::vector<long long> ids;
    std::size_t at = 0;
    do {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        const std::vector<std::string> items = split_words(list.substr(at, comma - at));
        if (items.empty())
            throw usage_error("--ids", (text.find_first_not_of(" \t") == std::string::npos ? "no token ids " : "an empty id ") +
                                           expected_got(expected, in_quotes(text)));
        for (const auto& item : items) {
            long long id = 0;
            const std::errc ec = whole_number(item, id);
            if (ec == std::errc::invalid_argument) throw usage_error("--ids", "not a token id " + expected_got(expected, in_quotes(item)));
            if (ec != std::errc() || id < 0)
                throw usage_error("--ids", "out of range " + expected_got("ids from 0 to " + std::to_string(std::numeric_limits<long long>::max()), item));
            ids.push_back(id);
        }
        at = comma + 1;
    } while (at <= list.size());
    return ids;
}

}  // namespace

/// A number option that must be finite: CLI11 reads "nan" and "inf" as doubles, which
/// then gave all-NaN output and "scale": null.
const CLI::Validator finite_number(
    [](std::string& text) {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        return end != text.c_str() && *end == '\0' && !std::isfinite(v)
                   ? "not a finite number " + expected_got("a finite number", text)
                   : std::string();
    },
    "");  // no description: the type name already says FLOAT

const CLI::Validator a_number(
    [](std::string& text) {
        char* end = nullptr;
        std::strtod(text.c_str(), &end);
        return text.empty() || end == text.c_str() || *end != '\0' || std::isspace(static_cast<unsigned char>(text[0]))
                   ? "not a number " + expected_got("a number", in_quotes(text))
                   : std::string();
    },
    "");

const CLI::Validator positive_number(
    [](std::string& text) {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        return end != text.c_str() && *end == '\0' && !(v > 0) ? "not a number > 0 " + expected_got("a number > 0", text)
                                                                 : std::string();
    },
    "");

void add_rope_options(CLI::App& sub, pipeline_cli& c) {
    sub.add_option("--rope", c.rope,
                    "RoPE on Q and K after the projections: half (dims j, j+R/2: GPT-NeoX, HF rotate_half, ONNX "
                    "interleaved=0) or interleaved (dims 2j, 2j+1: GPT-J, Meta Llama, ONNX interleaved=1)")
        ->check(CLI::IsMember({"half", "interleaved"}))
        ->group("Positions");
    sub.add_option("--rope-theta", c.rope_theta, "RoPE base: inv_freq_j = theta^(-2j/R)")
        ->each([&c](const std::string&) { c.rope_theta_set = true; })
        ->check(a_number)
        ->check(finite_number)
        ->check(positive_number)
        ->capture_default_str()
        ->group("Positions");
    sub.add_option("--rotary-dim", c.rotary_dim, "Rotate only the first R dims of each head (default: all; R even)")
        ->check(non_negative_count)
        ->check(CLI::Validator(
            [](std::string& text) {
                return text.find_first_not_of('0') == std::string::npos
                           ? "not a number > 0 " + expected_got("an even number ≥ 2 (leave it out to rotate all dims)", text)
                           : std::string();
            },
            ""))
        ->type_name("R")
        ->group("Positions");
}

void add_tensor_option(CLI::App& sub, pipeline_cli& c, const std::string& option, const std::string& name) {
    sub.add_option_function<std::string>(
           "--" + option, [&c, name](const std::string& spec) { c.tensor_files[name] = spec; },
           "Array '" + name + "' from FILE or FILE.npz:NAME")
        ->type_name("FILE")
        ->group("Input arrays");
}

void add_pipeline_options(CLI::App& sub, pipeline_cli& c) {
    for (const auto& [opt, name] : tensor_options()) add_tensor_option(sub, c, opt, name);
    sub.add_option("--mask", c.mask, "Masks to apply: none, causal, padding (comma-separated)")
        ->delimiter(',')
        ->allow_extra_args(false)
        ->check(CLI::IsMember({"none", "causal", "padding"}))
        ->group("Masks");
    sub.add_flag("--causal", c.causal, "Same as --mask causal")->group("Masks");
    sub.add_option("--causal-align", c.causal_align,
                    "top-left: key j visible from query i iff j <= i + past length (PyTorch is_causal, ONNX); "
                    "bottom-right: offset = valid keys - Tq (FlashAttention)")
        ->check(CLI::IsMember({"top-left", "bottom-right"}))
        ->capture_default_str()
        ->group("Masks");
    sub.add_option("--lengths", c.lengths, "Valid keys per batch item, e.g. 3,5 (keys past them are padding)")
        ->delimiter(',')
        ->allow_extra_args(false)
        ->check(non_negative_count)
        ->group("Masks");
    sub.add_option_function<long long>("--pad-id", [&c](long long id) { c.pad_id = id; },
                                       "token_ids equal to this are padding keys")
        ->check(any_whole_number)
        ->type_name("INT")
        ->group("Masks");
    sub.add_option_function<std::vector<std::string>>(
           "--ids", [&c](const std::vector<std::string>& words) { c.ids = parse_ids(words); },
           "Token ids: 3,1,4 or 3 1 4 or '[3, 1, 4]' (every word up to the next option, so give INPUT "
           "before --ids): the token_ids array (T,), for --embedding (X = E[ids]) or --pad-id")
        ->expected(1, CLI::detail::expected_max_vector_size)
        ->allow_extra_args(true)
        ->type_name("IDS")
        ->group("Input arrays");
    sub.add_option("--window", c.window,
                    "Sliding window LEFT[,RIGHT] (ONNX Attention opset 25): with p = i + offset (the causal "
                    "offset, whether or not --mask causal is on), key j is visible iff p - LEFT <= j <= p + "
                    "RIGHT; -1 leaves a side unbounded; RIGHT defaults to -1. --window 3 --mask causal sees 4 keys")
        ->delimiter(',')
        ->allow_extra_args(false)
        ->check(window_side)
        ->type_name("LEFT[,RIGHT]")
        ->group("Masks");
    sub.add_option("--prefix-len", c.prefix_len,
                    "Prefix LM: keys j < N are visible to every query on top of the causal mask (T5/UniLM); "
                    "one N, or one per batch item")
        ->delimiter(',')
        ->allow_extra_args(false)
        ->check(non_negative_count)
        ->type_name("N[,N2...]")
        ->group("Masks");
    sub.add_option("--cu-seqlens", c.cu_seqlens,
                    "Documents packed in one row, as FlashAttention varlen's cumulative lengths (e.g. 0,3,7): "
                    "a query sees only keys of its own document (same as a document_ids array)")
        ->delimiter(',')
        ->allow_extra_args(false)
        ->check(non_negative_count)
        ->type_name("0,C1,...,T")
        ->group("Masks");
    sub.add_option("--sink-tokens", c.sink_tokens,
                   "StreamingLLM: the first K keys stay visible through the --window")
        ->check(non_negative_count)
        ->type_name("K")
        ->group("Masks");
    sub.add_flag("--alibi", c.alibi,
                 "ALiBi (Press et al. 2022): add -m_h*|p - j| to the scores, slopes m_h from the paper for Hq heads")
        ->group("Masks");
    sub.add_option("--attn-mask-true", c.attn_mask_true,
                    "What True means in a bool attn_mask: attend (PyTorch SDPA, ONNX) or masked "
                    "(nn.MultiheadAttention's bool attn_mask)")
        ->check(CLI::IsMember({"attend", "masked"}))
        ->capture_default_str()
        ->group("Masks");
    sub.add_option("--layout", c.layout,
                   "Axes of x, x_kv, q, k, v (default: by rank, 4-D as bhtd, 2-D/3-D as bte): bhtd (B, H, T, D); "
                   "bthd (B, T, H, D), as FlashAttention and Hugging Face give them, the q, k, v, x and output "
                   "stages written (B, T, H, D) too; bte (B, T, E) or (T, E); tbe (T, B, E) = --seq-first. "
                   "An input of another rank is refused")
        ->check(CLI::IsMember({"bhtd", "bthd", "tbe", "bte"}))
        ->type_name("AXES")
        ->group("Input arrays");
    sub.add_flag("--seq-first", c.seq_first,
                 "Same as --layout tbe: rank-3 x, x_kv, q, k, v are (T, B, E), as nn.MultiheadAttention("
                 "batch_first=False); the q, k, v and output stages are written (T, B, ·) too, weights stay "
                 "(B, …, Tq, Tk)");
    sub.add_option("--mask-fill", c.mask_fill,
                    "Value of masked cells: -inf (default) or a finite number like -1e9 (masked_fill idiom, "
                    "replaces the score)")
        ->group("Masks");
    sub.add_option("--masked-rows", c.masked_rows,
                    "Fully masked rows: zero (weights and output 0, as ONNX and PyTorch) or nan (naive 0/0)")
        ->check(CLI::IsMember({"zero", "nan"}))
        ->capture_default_str()
        ->group("Masks");
    sub.add_option_function<double>("--scale", [&c](double scale) { c.scale = scale; },
                                    "Multiplier of Q·Kᵀ (default 1/sqrt(Dk))")
        ->type_name("FLOAT")
        ->check(a_number)
        ->check(finite_number);
    sub.add_option("--softcap", c.softcap, "If > 0: scaled = c·tanh(scaled/c), before masking")
        ->type_name("FLOAT")
        ->check(a_number)
        ->check(finite_number);
    sub.add_option("--heads", c.heads, "Query heads: splits the last axis of rank-3 inputs head-major")
        ->type_name("N")
        ->check(CLI::Range(1, 1 << 20));
    sub.add_option("--kv-heads", c.kv_heads, "Key/value heads (GQA/MQA; default = --heads)")
        ->type_name("N")
        ->check(CLI::Range(1, 1 << 20));
    sub.add_option("--weight-layout", c.weight_layout,
                    "out-in: Q = X·W_qᵀ + b (PyTorch nn.Linear); in-out: Q = X·W_q + b")
        ->check(CLI::IsMember({"out-in", "in-out"}))
        ->capture_default_str();
    sub.add_option("--dtype", c.dtype, "Compute dtype (default: the inputs' float type; float16 → float32)")
        ->check(CLI::IsMember({"float32", "float64"}));
    sub.add_flag("--average-heads", c.average_heads, "Average Tq×Tk stages over heads (average_attn_weights)")
        ->group("Output");
    sub.add_option("--tokens", c.tokens, "Token labels, space-separated, e.g. \"my name is Aj\"")->group("Output");
    sub.add_option("--tokens-kv", c.tokens_kv,
                    "Key labels for cross-attention (or a KV cache), space-separated: one per key")
        ->group("Output");
    add_rope_options(sub, c);
    sub.add_option("--posenc", c.posenc,
                    "Add sinusoidal positional encodings to X (and X_kv) before the projections: interleaved "
                    "(sin/cos alternating, Vaswani et al.) or concat (sines then cosines, tensor2tensor)")
        ->check(CLI::IsMember({"interleaved", "concat"}));
    sub.add_option("--posenc-base", c.posenc_base, "Base of the --posenc frequencies")
        ->check(a_number)
        ->check(finite_number)
        ->check(positive_number)
        ->capture_default_str();
    sub.add_option("--kernel", c.kernel,
                    "fast, or reference: plain loops in double (no tiling, SIMD or BLAS) to cross-check the fast "
                    "path on your data; compare the two outputs with attn compare")
        ->check(CLI::IsMember({"fast", "reference"}))
        ->capture_default_str();
    sub.add_option("--layer", c.layer,
                    "INPUT is a checkpoint (.safetensors or .safetensors.index.json): compute layer N's attention "
                    "(from 0), or all layers (a leading layer axis on every stage)")
        ->type_name("N|all")
        ->check(CLI::Validator(
            [](std::string& text) {
                if (text == "all") return std::string();
                std::size_t n = 0;
                const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
                return ec == std::errc() && p == text.data() + text.size() ? std::string()
                                                                            : "not a layer " + expected_got("a number ≥ 0 or all", text);
            },
            ""))
        ->group("Checkpoint");
    sub.add_option("--arch", c.arch, "Model family of the checkpoint (default: config.json's model_type; llama covers "
                                     "mistral and qwen2)")
        ->check(CLI::IsMember(model::family_names()))
        ->group("Checkpoint");
    sub.add_option("--config", c.config, "The model's config.json (default: the one beside the checkpoint)")
        ->type_name("FILE")
        ->group("Checkpoint");
    sub.add_option("--vocab", c.vocab, "tokenizer.json: label the tokens by decoding their ids")
        ->type_name("FILE")
        ->group("Checkpoint");
}

void add_run_options(CLI::App& sub, pipeline_cli& c) {
    sub.add_option("-j,--jobs", c.jobs, "Worker threads (default: all cores)")->type_name("N")->check(CLI::Range(1, 1 << 20));
    add_max_bytes_option(sub);
}

void add_max_bytes_option(CLI::App& sub) {
    // Applied while parsing, before the subcommand reads anything.
    sub.add_option_function<std::string>(
           "--max-bytes", [](const std::string& text) { io::set_max_array_bytes(parse_size("--max-bytes", text)); },
           "Refuse input arrays (and files) larger than N bytes before reading them; suffixes K, M, G, T "
           "are powers of 1024, e.g. 512M, 2G (default: a quarter of physical memory)")
        ->type_name("N");
}

attn::pipeline_options pipeline_settings(const pipeline_cli& c, std::vector<std::string> dump) {
    attn::pipeline_options p;
    if (!checkpoint_run(c) && (!c.config.empty() || !c.vocab.empty()))
        throw usage_error(c.config.empty() ? "--vocab" : "--config",
                          "applies to a checkpoint " + expected_got("--layer N or --layer all", "no --layer"));
    const bool none = std::find(c.mask.begin(), c.mask.end(), "none") != c.mask.end();
    for (const auto& m : c.mask) {
        if (m == "causal") p.causal = true;
        else if (m == "padding") p.padding_required = true;
    }
    // Contradictions are refused, not resolved by a guess.
    if (none && (p.causal || p.padding_required || c.causal))
        throw usage_error("--mask", "none contradicts the other masks " +
                                        expected_got("none alone", join(c.mask, ",") + (c.causal ? " and --causal" : "")));
    p.padding_refused = none;
    p.causal = p.causal || c.causal;
    p.align = c.causal_align == "bottom-right" ? core::causal_align::bottom_right : core::causal_align::top_left;
    p.lengths = c.lengths;
    p.pad_id = c.pad_id;
    p.scale = c.scale;
    p.softcap = c.softcap;
    p.heads = c.heads;
    p.kv_heads = c.kv_heads;
    p.layout = c.weight_layout == "in-out" ? core::weight_layout::in_out : core::weight_layout::out_in;
    if (!c.mask_fill.empty()) p.fill = parse_fill(c.mask_fill);
    p.rows = c.masked_rows == "nan" ? core::masked_rows::nan : core::masked_rows::zero;
    if (c.dtype == "float32") p.compute_type = dtype::f4;
    if (c.dtype == "float64") p.compute_type = dtype::f8;
    // A stage asked for twice is written once (a JSON object cannot hold a key twice).
    p.dump.clear();
    for (auto& d : dump)
        if (std::find(p.dump.begin(), p.dump.end(), d) == p.dump.end()) p.dump.push_back(std::move(d));
    p.average_heads = c.average_heads;
    p.tokens = split_words(c.tokens);
    p.tokens_kv = split_words(c.tokens_kv);
    p.threads = c.jobs;
    if (!c.posenc.empty()) p.posenc = core::parse_posenc_style(c.posenc);
    p.posenc_base = c.posenc_base;
    p.kernel = c.kernel == "reference" ? attn::kernel_kind::reference : attn::kernel_kind::fast;
    p.attn_mask_true_masks = c.attn_mask_true == "masked";
    if (c.seq_first && !c.layout.empty() && c.layout != "tbe")
        throw usage_error("--seq-first", "contradicts --layout " + c.layout + " " + expected_got("--layout tbe or no --layout", "--layout " + c.layout));
    using layout = attn::pipeline_options::input_layout;
    p.layout_of_inputs = c.layout == "bhtd" ? layout::bhtd
                         : c.layout == "bthd" ? layout::bthd
                         : c.layout == "bte"  ? layout::bte
                         : c.layout == "tbe"  ? layout::tbe
                                              : layout::by_rank;
    p.seq_first = c.seq_first || c.layout == "tbe";
    p.ids = c.ids;
    p.prefix_len = c.prefix_len;
    p.sink_tokens = c.sink_tokens;
    p.alibi = c.alibi;
    p.cu_seqlens = c.cu_seqlens;
    if (!c.rope.empty()) p.rope = core::parse_rope_style(c.rope);
    p.rope_theta = c.rope_theta;
    p.rope_theta_given = c.rope_theta_set;
    p.rotary_dim = c.rotary_dim;
    p.sink_k = c.sink_k;
    if (!c.window.empty()) {
        if (c.window.size() > 2 || c.window[0] < -1 || (c.window.size() == 2 && c.window[1] < -1))
            throw usage_error("--window", "not LEFT[,RIGHT] with each side -1 (unbounded) or ≥ 0 " +
                                              expected_got("e.g. 3 or 2,2 or -1,0", [&] {
                                                  std::string t;
                                                  for (auto w : c.window) t += (t.empty() ? "" : ",") + std::to_string(w);
                                                  return t;
                                              }()));
        p.window_left = c.window[0];
        p.window_right = c.window.size() == 2 ? c.window[1] : -1;
    }
    return p;
}

std::vector<const CLI::Option*> compute_only_options(const CLI::App& sub, std::size_t before) {
    std::vector<const CLI::Option*> out;
    const std::vector<const CLI::Option*> all = sub.get_options();
    for (std::size_t i = before; i < all.size(); ++i)
        if (all[i]->get_name() != "--tokens" && all[i]->get_name() != "--tokens-kv" && all[i]->get_name() != "--max-bytes")
            out.push_back(all[i]);
    return out;
}

bool checkpoint_run(const pipeline_cli& c) { return !c.layer.empty() || !c.arch.empty(); }

/// A model directory as transformers' from_pretrained takes it: its model.safetensors,
/// else its model.safetensors.index.json (config.json and tokenizer.json are then found
/// beside it). Any other path is returned as given. Throws io_error(dir, …) for a
/// directory with neither.
std::string checkpoint_in(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec)) return path;
    for (const char* name : {"model.safetensors", "model.safetensors.index.json"}) {
        const std::filesystem::path p = std::filesystem::path(path) / name;
        if (std::filesystem::exists(p, ec)) return p.string();
    }
    throw io_error(path, "a directory without a checkpoint (expected model.safetensors or "
                         "model.safetensors.index.json in it)");
}

attn::checkpoint_options checkpoint_settings(const std::string& path, const pipeline_cli& c) {
    attn::checkpoint_options ck;
    if (path.empty() || path == "-")
        throw usage_error("--layer", "needs a checkpoint file " +
                                         expected_got("INPUT model.safetensors or its .index.json", path.empty() ? "none" : "-"));
    ck.path = checkpoint_in(path);
    ck.config = c.config;
    ck.arch = model::parse_arch(c.arch);
    if (c.layer.empty())
        throw usage_error("--arch", "needs the layer to compute " + expected_got("--layer N or --layer all", "none"));
    if (c.layer != "all") ck.layer = std::stoull(c.layer);  // checked by --layer's validator
    ck.vocab = c.vocab;
    return ck;
}

io::document run_pipeline(const std::string& input, const pipeline_cli& c, const attn::pipeline_options& settings) {
    if (checkpoint_run(c)) {
        const attn::checkpoint_options ck = checkpoint_settings(input, c);
        io::bundle extra = gather_inputs("", c);
        return attn::compute_checkpoint(ck, std::move(extra.arrays), {}, settings);
    }
    io::bundle b = gather_inputs(input, c);
    return attn::compute(std::move(b.arrays), b.tokens, settings);
}

bool takes_file(const std::string& option) {
    if (option == "config" || option == "vocab") return true;
    const auto& t = tensor_options();
    return std::any_of(t.begin(), t.end(), [&](const auto& entry) { return entry.first == option; });
}

std::string name_list(const std::vector<std::string>& names, std::size_t most) {
    std::string s;
    for (std::size_t i = 0; i < names.size() && i < most; ++i) s += (i ? ", " : "") + names[i];
    if (names.size() > most) s += ", … (" + std::to_string(names.size()) + " in all)";
    return s;
}

io::bundle gather_inputs(const std::string& input, const pipeline_cli& c) {
    io::bundle b;
    if (!input.empty()) b = io::load_bundle(input);
    // Never a silent wrong answer: an array the file holds that attn does not use (a
    // mask under another name, bias_k of a state_dict) is named on stderr.
    // A checkpoint with no attention inputs is refused by the caller, with a hint.
    if (!b.ignored.empty() && !(b.arrays.empty() && io::is_checkpoint_file(input)))
        print_warning((input == "-" ? "<stdin>" : input) + ": ignored arrays " + name_list(b.ignored) +
                      " (not an input name; see attn compute --help)");
    const auto holds = [&b](const std::string& name) {
        return std::any_of(b.arrays.begin(), b.arrays.end(), [&](const io::named_array& n) { return n.name == name; });
    };
    // One table of the pair given on the command line is the command line's fault (exit 2),
    // checked before any file is read.
    for (const auto& [given, other] : {std::pair{"rope_cos", "rope_sin"}, {"rope_sin", "rope_cos"}})
        if (c.tensor_files.count(given) && !c.tensor_files.count(other) && !holds(other)) {
            const std::string opt = given == std::string("rope_cos") ? "--rope-cos" : "--rope-sin";
            const std::string need = given == std::string("rope_cos") ? "--rope-sin" : "--rope-cos";
            throw usage_error(opt, "needs " + need + " " + expected_got("--rope-cos and --rope-sin", opt + " only"));
        }
    for (const auto& [name, spec] : c.tensor_files) {
        array a = io::load_array(spec);
        auto it = std::find_if(b.arrays.begin(), b.arrays.end(), [&wanted = name](const io::named_array& n) { return n.name == wanted; });
        if (it != b.arrays.end()) it->value = std::move(a);
        else b.arrays.push_back({name, std::move(a)});
    }
    // nn.MultiheadAttention's state dict does not record num_heads: one head over a wide
    // embedding is more likely a forgotten --heads than a model.
    for (const auto& a : b.arrays)
        if (a.name == "in_proj_weight" && c.heads == 0 && a.value.rank() == 2 && a.value.shape[0] % 3 == 0 &&
            a.value.shape[0] / 3 >= 64)
            print_warning("in_proj_weight: computed as one head of width " + std::to_string(a.value.shape[0] / 3) +
                          " (give --heads N, the module's num_heads)");
    return b;
}

}  // namespace attn::cli
