// rope_scaling / rope_parameters from config.json (include/attn/model/registry.hpp
// read_rope_scaling, docs/design.md §5.2): the RoPE description every RoPE family reads —
// llama (Mistral, Qwen2), gpt_neox, phi3 — with transformers' defaults
// (modeling_rope_utils.py), each family saying its key names and the types it computes.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/model/registry.hpp"
#include "attn/text.hpp"

namespace attn::model {

namespace {

/// A number under `name` in the rope_scaling object `o`; `fallback` when absent or null.
double rope_number(const config_reader& r, const nlohmann::json& o, const char* where, const char* name, double fallback) {
    auto it = o.find(name);
    if (it == o.end() || it->is_null()) return fallback;
    if (!it->is_number())
        throw value_error(r.source(), std::string(where) + "." + name + ": not a number " + expected_got("a number", it->dump()));
    return it->get<double>();
}

/// A length under `name` in `o` (a positive integer); `fallback` when absent or null.
std::size_t rope_length(const config_reader& r, const nlohmann::json& o, const char* where, const char* name, std::size_t fallback) {
    auto it = o.find(name);
    if (it == o.end() || it->is_null()) return fallback;
    if (!it->is_number_integer() || it->get<long long>() <= 0 || it->get<long long>() > static_cast<long long>(max_config_count))
        throw value_error(r.source(), std::string(where) + "." + name + ": not a positive integer " +
                                          expected_got("an integer in [1, " + std::to_string(max_config_count) + "]", it->dump()));
    return it->get<std::size_t>();
}

/// A list of numbers under `name` in `o` (longrope's short_factor / long_factor).
std::vector<double> rope_list(const config_reader& r, const nlohmann::json& o, const char* where, const char* name) {
    auto it = o.find(name);
    if (it == o.end() || it->is_null()) return {};
    std::vector<double> v;
    if (it->is_array())
        for (const auto& e : *it) {
            if (!e.is_number()) { v.clear(); break; }
            v.push_back(e.get<double>());
        }
    if (!it->is_array() || v.size() != it->size())
        throw value_error(r.source(), std::string(where) + "." + name + ": not a list of numbers " +
                                          expected_got("[numbers]", it->dump().substr(0, 80)));
    return v;
}

/// "\"a\", \"b\" or \"c\"".
std::string quoted_list(const std::vector<std::string>& items) {
    std::vector<std::string> quoted;
    for (const std::string& item : items) quoted.push_back("\"" + item + "\"");
    return listed(quoted);
}

}  // namespace

bool theta_written(const config_reader& r) {
    if (r.find("rope_theta")) return true;
    const nlohmann::json* p = r.find("rope_parameters");
    return p && p->is_object() && p->contains("rope_theta");
}

void read_rope_scaling(const config_reader& r, config& c, const rope_config_keys& keys) {
    // transformers v5's convert_rope_params_to_dict: rope_parameters = rope_scaling or
    // rope_parameters, so an empty (or null) rope_scaling leaves rope_parameters to be read.
    c.origin.theta = keys.theta;
    c.origin.partial = keys.partial;
    const char* where = "rope_scaling";
    const nlohmann::json* rs = r.find("rope_scaling");
    if (!rs || (rs->is_object() && rs->empty() && r.find("rope_parameters"))) {
        rs = r.find("rope_parameters");
        where = "rope_parameters";
    }
    if (!rs) return;
    if (!rs->is_object())
        throw value_error(r.source(), std::string(where) + ": not an object " + expected_got("null or {\"rope_type\": …}", rs->dump()));
    c.origin.rope = where;
    // rope_type, or the older type (standardize_rope_params: rope_type = get("type")): a
    // string. Neither, in an object holding more than the base and the rotated fraction,
    // is refused: transformers v5 would read it as "default" and drop its factors.
    std::string kind;
    for (const char* k : {"rope_type", "type"}) {
        auto t = rs->find(k);
        if (t == rs->end() || t->is_null()) continue;
        if (!t->is_string())
            throw value_error(r.source(), std::string(where) + "." + k + ": not a string " +
                                              expected_got(quoted_list(keys.kinds), t->dump()));
        kind = t->get<std::string>();
        break;
    }
    if (kind.empty()) {
        std::vector<std::string> others;
        for (const auto& [name, value] : rs->items())
            if (name != "rope_theta" && name != "partial_rotary_factor" && name != "rope_type" && name != "type")
                others.push_back(name);
        if (!others.empty())
            throw value_error(r.source(), std::string(where) + ": no rope_type, but " + others.front() +
                                              " is given " + expected_got("a rope_type: " + quoted_list(keys.kinds), "none"));
        kind = "default";
    }
    for (const auto& [old_name, name] : keys.aliases)
        if (kind == old_name) kind = name;
    if (std::find(keys.kinds.begin(), keys.kinds.end(), kind) == keys.kinds.end())
        throw value_error(r.source(), std::string(where) + " \"" + kind + "\" is not implemented by attn (expected " +
                                          quoted_list(keys.kinds) + "; positions would be rotated wrongly)");
    // The base: rope_parameters' rope_theta wins over the top-level key, as transformers v5's
    // convert_rope_params_to_dict (rope_parameters.setdefault("rope_theta", kwargs.pop("rope_theta")));
    // the top-level one, read by the family, was checked there.
    if (auto t = rs->find("rope_theta"); t != rs->end() && !t->is_null()) {
        const double theta = rope_number(r, *rs, where, "rope_theta", c.rope_theta);
        if (!(theta > 0) || !std::isfinite(theta))
            throw value_error(r.source(), std::string(where) + ".rope_theta: not a finite number > 0 " +
                                              expected_got("a number > 0", t->dump()));
        c.rope_theta = theta;
        c.origin.theta = std::string(where) + ".rope_theta";
    }
    // The rotated fraction: the top-level key wins (standardize_rope_params copies the
    // config's partial_rotary_factor attribute over rope_parameters').
    if (auto t = rs->find("partial_rotary_factor"); t != rs->end() && !t->is_null() && !r.find(keys.partial)) {
        const double partial = rope_number(r, *rs, where, "partial_rotary_factor", c.partial_rotary_factor);
        const std::string key = std::string(where) + ".partial_rotary_factor";
        if (!(partial > 0) || !std::isfinite(partial))
            throw value_error(r.source(), key + ": not a finite number > 0 " + expected_got("a number > 0", t->dump()));
        if (partial > 1)
            throw value_error(r.source(), key + ": more than 1 " + expected_got("a number in (0, 1]", general_number(partial)));
        c.partial_rotary_factor = partial;
        c.origin.partial = key;
    }
    core::rope_scaling& s = c.rope_scaling;
    s.kind = core::parse_rope_scaling_kind(kind);
    if (s.kind == core::rope_scaling_kind::none) return;
    const std::size_t top_original = r.find("original_max_position_embeddings")
                                         ? r.size({"original_max_position_embeddings"}, 0)
                                         : keys.original_max_position_embeddings;
    s.max_position_embeddings = c.max_positions;
    s.original_max_position_embeddings = rope_length(r, *rs, where, "original_max_position_embeddings",
                                                     s.kind == core::rope_scaling_kind::longrope && top_original ? top_original : c.max_positions);
    if (s.kind == core::rope_scaling_kind::llama3 && !rs->contains("original_max_position_embeddings"))
        throw value_error(r.source(), std::string(where) + ": llama3 without original_max_position_embeddings " +
                                          expected_got("an integer", "none"));
    double fallback_factor = 1.0;
    if (s.kind == core::rope_scaling_kind::longrope)
        fallback_factor = static_cast<double>(c.max_positions) / static_cast<double>(s.original_max_position_embeddings);
    s.factor = rope_number(r, *rs, where, "factor", fallback_factor);
    if (rs->contains("attention_factor") && !(*rs)["attention_factor"].is_null())
        s.attention_factor = rope_number(r, *rs, where, "attention_factor", 1.0);
    s.beta_fast = rope_number(r, *rs, where, "beta_fast", s.beta_fast);
    s.beta_slow = rope_number(r, *rs, where, "beta_slow", s.beta_slow);
    s.mscale = rope_number(r, *rs, where, "mscale", s.mscale);
    s.mscale_all_dim = rope_number(r, *rs, where, "mscale_all_dim", s.mscale_all_dim);
    if (auto t = rs->find("truncate"); t != rs->end() && !t->is_null()) {
        if (!t->is_boolean())
            throw value_error(r.source(), std::string(where) + ".truncate: not a boolean " + expected_got("true or false", t->dump()));
        s.truncate = t->get<bool>();
    }
    s.low_freq_factor = rope_number(r, *rs, where, "low_freq_factor", s.low_freq_factor);
    s.high_freq_factor = rope_number(r, *rs, where, "high_freq_factor", s.high_freq_factor);
    s.short_factor = rope_list(r, *rs, where, "short_factor");
    s.long_factor = rope_list(r, *rs, where, "long_factor");
}

}  // namespace attn::model
