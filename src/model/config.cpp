// config.json → model::config (docs/design.md §4.3): the keys every family shares (model_type,
// num_key_value_heads, head_dim, the divisibility checks) here; each family reads its own
// through family_spec::read_config (src/model/<family>.cpp), following transformers'
// GPT2Config, BertConfig, LlamaConfig, MistralConfig and Qwen2Config defaults.
#include "attn/model/config.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/model/registry.hpp"
#include "attn/text.hpp"

namespace attn::model {

namespace {

using json = nlohmann::json;

/// The first of `keys` present and not null, or nullptr.
const json* first_of(const json& j, std::initializer_list<const char*> keys) {
    for (const char* k : keys)
        if (auto it = j.find(k); it != j.end() && !it->is_null()) return &*it;
    return nullptr;
}

activation parse_activation(const std::string& name, const char* key, const std::string& source) {
    if (name == "gelu") return activation::gelu;
    if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") return activation::gelu_tanh;
    if (name == "silu" || name == "swish") return activation::silu;
    if (name == "relu") return activation::relu;
    if (name == "relu2") return activation::relu2;
    throw value_error(source, std::string(key) + ": activation \"" + name + "\" is not one attn implements " +
                                  expected_got("gelu, gelu_new, gelu_pytorch_tanh, gelu_fast, silu, swish, relu or relu2", name));
}

/// The first of `keys` config.json contains (null included), else the first.
const std::string& key_written(const json& j, const std::vector<std::string>& keys) {
    for (const auto& k : keys)
        if (j.contains(k)) return k;
    return keys.front();
}

/// Refuses config.json's quantization_config (transformers' HfQuantizer configs: a
/// quant_method such as bitsandbytes, gptq, awq, aqlm, eetq, hqq, compressed-tensors)
/// unless every family reads it — "fp8", block-scaled F8_E4M3 weights, which family::need
/// dequantises whatever the family (read_fp8) — or the family dequantises that method
/// itself (family_spec::quant_methods): other methods' weights are packed integers and
/// scales, which attn would read as numbers.
void refuse_quantization(const json& j, const family_spec& spec, const std::string& source) {
    const json* q = first_of(j, {"quantization_config"});
    if (!q) return;
    const json* method = q->is_object() ? first_of(*q, {"quant_method"}) : nullptr;
    if (!method || !method->is_string())
        throw value_error(source, "quantization_config: quantisation is not implemented by attn " +
                                      expected_got("float weights", q->dump().substr(0, 80)));
    const std::string m = method->get<std::string>();
    if (m == "fp8") return;
    if (std::find(spec.quant_methods.begin(), spec.quant_methods.end(), m) != spec.quant_methods.end()) return;
    // What the family reads instead: float weights, FP8, and the methods it dequantises itself.
    std::vector<std::string> accepted{"float weights", "quant_method \"fp8\""};
    for (const std::string& a : spec.quant_methods) accepted.push_back("quant_method \"" + a + "\"");
    throw value_error(source, "quantization_config: " + m + " quantisation is not implemented by attn " +
                                  expected_got(listed(accepted, " or "), "quant_method \"" + m + "\""));
}

/// An accepted "fp8" quantization_config (transformers' FineGrainedFP8Config, as DeepSeek-V3
/// publishes it): its weight_block_size [bm, bn] into c.fp8_block. Refused by name: a block
/// size that is not two positive integers (per-tensor FP8 among them), an activation_scheme
/// other than "dynamic" (static input scales), a fmt other than "e4m3" (DeepSeek-V3's name)
/// or "float8_e4m3fn" (MiniMax-M2's name of the same format).
void read_fp8(const json& j, config& c, const std::string& source) {
    const json* q = first_of(j, {"quantization_config"});
    if (!q || first_of(*q, {"quant_method"})->get<std::string>() != "fp8") return;
    const json* b = first_of(*q, {"weight_block_size"});
    const bool blocks = b && b->is_array() && b->size() == 2 &&
                        std::all_of(b->begin(), b->end(), [](const json& v) { return v.is_number_unsigned() && v.get<std::size_t>() > 0; });
    if (!blocks)
        throw value_error(source, "quantization_config.weight_block_size: only block-scaled FP8 is decoded by attn " +
                                      expected_got("two positive integers, as [128, 128]", b ? b->dump() : "none"));
    const std::pair<const char*, std::vector<std::string>> variants[] = {{"activation_scheme", {"dynamic"}},
                                                                         {"fmt", {"e4m3", "float8_e4m3fn"}}};
    for (const auto& [k, accepted] : variants) {
        const json* v = first_of(*q, {k});
        if (!v || std::any_of(accepted.begin(), accepted.end(), [&](const std::string& a) { return *v == a; })) continue;
        std::vector<std::string> quoted;
        for (const std::string& a : accepted) quoted.push_back("\"" + a + "\"");
        throw value_error(source, std::string("quantization_config.") + k + ": this FP8 variant is not decoded by attn " +
                                      expected_got(listed(quoted, " or "), v->dump()));
    }
    c.fp8_block = {(*b)[0].get<std::size_t>(), (*b)[1].get<std::size_t>()};
}

}  // namespace

std::size_t config_reader::size(std::initializer_list<const char*> keys, std::size_t fallback, bool zero_ok) const {
    const json* v = first_of(j_, keys);
    const std::string& source = source_;
    if (!v) {
        if (fallback) return fallback;
        throw value_error(source, std::string("missing ") + *keys.begin() + " (expected a positive integer, got nothing)");
    }
    const char* key = *keys.begin();
    for (const char* k : keys)
        if (j_.contains(k) && !j_.at(k).is_null()) {
            key = k;
            break;
        }
    const char* want = zero_ok ? "an integer ≥ 0" : "a positive integer";
    if (!v->is_number_integer() || v->get<long long>() < (zero_ok ? 0 : 1))
        throw value_error(source, std::string(key) + ": not " + want + " " + expected_got(want, v->dump()));
    if (v->get<unsigned long long>() > max_config_count)
        throw value_error(source, std::string(key) + ": more than attn accepts " +
                                      expected_got("at most " + std::to_string(max_config_count), v->dump()));
    return v->get<std::size_t>();
}

bool config_reader::flag(const char* key, bool fallback) const {
    const json* v = first_of(j_, {key});
    if (!v) return fallback;
    if (!v->is_boolean()) throw value_error(source_, std::string(key) + ": not a boolean " + expected_got("true or false", v->dump()));
    return v->get<bool>();
}

void config_reader::refuse_unless(const char* key, const json& accepted, const std::string& why) const {
    const json* v = first_of(j_, {key});
    if (!v || *v == accepted) return;
    throw value_error(source_, std::string(key) + ": not implemented by attn, " + why + " " +
                                   expected_got(accepted.dump(), v->dump()));
}

double config_reader::number(std::initializer_list<const char*> keys, double fallback) const {
    const json* v = first_of(j_, keys);
    if (!v) return fallback;
    if (!v->is_number() || !std::isfinite(v->get<double>()) || !(v->get<double>() > 0))
        throw value_error(source_, std::string(*keys.begin()) + ": not a finite number > 0 " +
                                       expected_got("a number > 0", v->dump()));
    return v->get<double>();
}

std::string config_reader::text(std::initializer_list<const char*> keys, const std::string& fallback) const {
    const json* v = first_of(j_, keys);
    if (!v) return fallback;
    if (!v->is_string())
        throw value_error(source_, std::string(*keys.begin()) + ": not a string " + expected_got("a string", v->dump()));
    return v->get<std::string>();
}

activation config_reader::act(const char* key, const std::string& fallback) const {
    return parse_activation(text({key}, fallback), key, source_);
}

const json* config_reader::find(const char* key) const { return first_of(j_, {key}); }

const std::string& arch::name() const { return spec_->name; }

const std::string& arch_name(const arch& a) { return a.name(); }

std::optional<arch> parse_arch(const std::string& name) {
    if (const family_spec* f = find_family(name)) return arch(*f);
    return std::nullopt;
}

std::vector<std::string> family_names() {
    std::vector<std::string> names;
    for (const family_spec* f : families()) names.push_back(f->name);
    return names;
}

namespace {

/// The first family listing one of config.json's `architectures` classes, with that class;
/// {nullptr, ""} when none does or the key is not a list of strings.
std::pair<const family_spec*, std::string> family_for_architectures(const json& j) {
    const auto a = j.find("architectures");
    if (a == j.end() || !a->is_array()) return {nullptr, ""};
    for (const json& name : *a) {
        if (!name.is_string()) continue;
        for (const family_spec* f : families())
            if (std::find(f->architectures.begin(), f->architectures.end(), name.get<std::string>()) != f->architectures.end())
                return {f, name.get<std::string>()};
    }
    return {nullptr, ""};
}

}  // namespace

config parse_config(const std::string& json_text, const std::string& source, std::optional<arch> forced) {
    json j;
    try {
        j = json::parse(json_text);
    } catch (const json::exception& e) {
        // parse_error, and out_of_range for a number beyond double (1e999).
        throw value_error(source, "not valid JSON (" + std::string(e.what()) + ")");
    }
    if (!j.is_object()) throw value_error(source, "not a JSON object " + expected_got("{...}", j.type_name()));
    const config_reader r{j, source};
    config c;
    c.origin.file = source;
    c.model_type = r.text({"model_type"}, "");
    if (forced) {
        c.family = *forced;
    } else if (const family_spec* f = family_for_model_type(c.model_type)) {
        c.family = arch(*f);
    } else if (const auto [by_class, name] = family_for_architectures(j); by_class) {
        c.family = arch(*by_class);
        c.architecture = name;
    } else {
        std::vector<std::string> types;
        for (const family_spec* f : families()) types.insert(types.end(), f->model_types.begin(), f->model_types.end());
        // Listed word by word: a '|'-joined list is one word, which messages cut at 200 bytes.
        // The --arch names are left to --help: both lists grew past the 1024-byte message cut.
        throw value_error(source, "model_type \"" + c.model_type + "\" is not a family attn knows (expected " +
                                      listed(types, " or ") + ", or --arch with a family attn compute --help lists)");
    }
    const family_spec& spec = c.family->spec();
    // A composite model's text config (Gemma 3's text_config) holds every key read below.
    const json* sub = spec.sub_config.empty() ? nullptr : first_of(j, {spec.sub_config.c_str()});
    if (sub && !sub->is_object())
        throw value_error(source, spec.sub_config + ": not an object " + expected_got("{...}", sub->type_name()));
    const json& body = sub ? *sub : j;
    const config_reader rb{body, source};
    refuse_quantization(j, spec, source);  // quantization_config sits at the top level, beside text_config
    read_fp8(j, c, source);
    spec.read_config(rb, c);
    for (const refused_key& k : spec.refused) rb.refuse_unless(k.key, k.accepted, k.why);
    // A family whose config class defaults num_key_value_heads (Qwen3NextConfig's 2) sets it
    // in read_config; else the heads (MHA).
    c.kv_heads = rb.size({"num_key_value_heads"}, c.kv_heads ? c.kv_heads : c.heads);
    const std::string& heads_key = key_written(body, spec.heads_keys);
    const std::string& hidden_key = key_written(body, spec.hidden_keys);
    const bool given_head_dim = spec.reads_head_dim && first_of(body, {"head_dim"});
    const bool explicit_head_dim = given_head_dim || (spec.reads_head_dim && spec.default_head_dim);
    if (!explicit_head_dim && c.hidden % c.heads != 0)
        throw value_error(source, heads_key + " " + std::to_string(c.heads) + " does not divide " + hidden_key + " " +
                                      std::to_string(c.hidden) + " " +
                                      expected_got(std::string("a divisor of ") + std::to_string(c.hidden) +
                                                       (spec.reads_head_dim ? ", or a head_dim" : ""),
                                                   std::to_string(c.heads)));
    c.head_dim = given_head_dim ? rb.size({"head_dim"}, 0) : explicit_head_dim ? spec.default_head_dim : c.hidden / c.heads;
    if (c.heads % c.kv_heads != 0)
        throw value_error(source, "num_attention_heads is not a multiple of num_key_value_heads " +
                                      expected_got("a divisor of " + std::to_string(c.heads), std::to_string(c.kv_heads)));
    return c;
}

}  // namespace attn::model
