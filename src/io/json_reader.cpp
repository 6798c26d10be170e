// JSON input (docs/design.md §2): nested lists become arrays, "tokens" becomes labels, anything
// else is skipped. Parsing is nlohmann/json's; this file only maps the DOM to arrays.

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/text.hpp"
#include "attn/io/json.hpp"
#include "attn/io/limits.hpp"

namespace attn::io {
namespace {

using json = nlohmann::ordered_json;

constexpr std::size_t max_rank = 5;  // (L, B, H, Tq, Tk): attention of every layer (attn rollout)

/// A JSON value as named in messages: "a number", "null", "an object", "a list of 2
/// elements", or a string as written (shortened).
std::string describe(const json& v) {
    switch (v.type()) {
        case json::value_t::null: return "null";
        case json::value_t::boolean: return "a boolean";
        case json::value_t::number_integer:
        case json::value_t::number_unsigned:
        case json::value_t::number_float: return "a number";
        case json::value_t::object: return "an object";
        case json::value_t::array:
            return "a list of " + std::to_string(v.size()) + (v.size() == 1 ? " element" : " elements");
        case json::value_t::string: {
            constexpr std::size_t max_len = 32;
            std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
            if (s.size() > max_len) {
                std::size_t cut = max_len;
                while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xc0) == 0x80) --cut;  // UTF-8 boundary
                s = s.substr(0, cut) + "...";
            }
            return s;
        }
        default: return "an unsupported value";
    }
}

enum class leaf_kind { boolean, integer, floating, invalid };

/// What a leaf is: invalid for anything but a number, a boolean or one of the
/// non-finite strings.
leaf_kind classify(const json& v) {
    switch (v.type()) {
        case json::value_t::boolean: return leaf_kind::boolean;
        case json::value_t::number_integer: return leaf_kind::integer;
        case json::value_t::number_unsigned:
            // Beyond int64 it cannot be stored exactly as an int64 array; NumPy would pick
            // uint64 or object, we fall back to float64.
            return v.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
                       ? leaf_kind::integer
                       : leaf_kind::floating;
        case json::value_t::number_float: return leaf_kind::floating;
        case json::value_t::string: {
            const auto& s = v.get_ref<const std::string&>();
            if (s == "NaN" || s == "Infinity" || s == "-Infinity") return leaf_kind::floating;
            break;
        }
        default: break;
    }
    return leaf_kind::invalid;
}

double to_double(const json& v) {
    if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
    if (v.is_string()) {
        const auto& s = v.get_ref<const std::string&>();
        if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
        return s == "Infinity" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
    }
    return v.get<double>();
}

/// Checks that a nested list is rectangular with the given shape and collects its leaves
/// in C order, noting which element type they fit.
struct flattener {
    const shape_t& shape;
    const std::string& source;
    std::vector<const json*> leaves;
    bool all_bool = true;
    bool all_int = true;
    std::vector<std::size_t> index;  // position of the node being visited

    /// "[1][0]": where the offending node is, spelled only when there is an error.
    std::string where() const {
        std::string s;
        for (std::size_t i : index) s += "[" + std::to_string(i) + "]";
        return s;
    }

    void walk(const json& node, std::size_t depth) {
        if (depth == shape.size()) {
            if (node.is_array())
                throw format_error(source, "ragged nested list at " + where() + " " +
                                               expected_got("a number", describe(node)));
            const leaf_kind kind = classify(node);
            if (kind == leaf_kind::invalid)
                throw format_error(source, "non-numeric entry at " + where() + " " +
                                               expected_got("a number", describe(node)));
            all_bool = all_bool && kind == leaf_kind::boolean;
            all_int = all_int && kind != leaf_kind::floating;
            leaves.push_back(&node);
            return;
        }
        if (!node.is_array() || node.size() != shape[depth]) {
            const std::string expected = "a list of " + std::to_string(shape[depth]) +
                                         (shape[depth] == 1 ? " element" : " elements");
            throw format_error(source, "ragged nested list at " + where() + " " +
                                           expected_got(expected, describe(node)));
        }
        index.push_back(0);
        for (std::size_t i = 0; i < node.size(); ++i) {
            index.back() = i;
            walk(node[i], depth + 1);
        }
        index.pop_back();
    }
};

/// A nested list as an array. `source` names the list in messages.
array to_array(const json& value, const std::string& source) {
    // The first element at each level fixes the shape; walk() then holds every other
    // element to it.
    shape_t shape;
    for (const json* node = &value; node->is_array(); node = &node->front()) {
        shape.push_back(node->size());
        if (node->empty()) break;
    }
    if (shape.size() > max_rank)
        throw value_error(source, "unsupported rank " +
                                      expected_got("0 to 5 dimensions", std::to_string(shape.size())));

    flattener f{shape, source, {}, true, true, {}};
    f.walk(value, 0);
    const bool all_bool = f.all_bool, all_int = f.all_int;

    array a;
    a.shape = shape;
    const std::size_t n = f.leaves.size();
    check_array_bytes(n * (n > 0 && all_bool ? 1 : 8), source);  // bool is 1 byte, int64/float64 8
    if (n > 0 && all_bool) {
        a.type = dtype::b1;
        a.data.resize(n);
        for (std::size_t i = 0; i < n; ++i) a.data[i] = f.leaves[i]->get<bool>() ? std::byte{1} : std::byte{0};
    } else if (n > 0 && all_int) {
        a.type = dtype::i8;
        a.data.resize(n * sizeof(std::int64_t));
        for (std::size_t i = 0; i < n; ++i) {
            const json& leaf = *f.leaves[i];
            const std::int64_t v = leaf.is_boolean() ? (leaf.get<bool>() ? 1 : 0) : leaf.get<std::int64_t>();
            std::memcpy(a.data.data() + i * sizeof v, &v, sizeof v);
        }
    } else {
        a.type = dtype::f8;
        a.data.resize(n * sizeof(double));
        for (std::size_t i = 0; i < n; ++i) {
            const double v = to_double(*f.leaves[i]);
            std::memcpy(a.data.data() + i * sizeof v, &v, sizeof v);
        }
    }
    return a;
}

std::vector<std::string> to_tokens(const json& value, const std::string& source) {
    std::vector<std::string> tokens;
    const std::string expected = "a list of strings or one string";
    if (value.is_string()) {
        const auto& s = value.get_ref<const std::string&>();
        std::size_t i = 0;
        auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
        while (i < s.size()) {
            while (i < s.size() && space(s[i])) ++i;
            std::size_t j = i;
            while (j < s.size() && !space(s[j])) ++j;
            if (j > i) tokens.push_back(s.substr(i, j - i));
            i = j;
        }
    } else if (value.is_array()) {
        for (const auto& t : value) {
            if (!t.is_string()) throw format_error(source, "bad tokens " + expected_got(expected, "a list holding " + describe(t)));
            tokens.push_back(t.get<std::string>());
        }
    } else {
        throw format_error(source, "bad tokens " + expected_got(expected, describe(value)));
    }
    return tokens;
}

}  // namespace

std::string json_error_text(const std::string& what) {
    std::string text = what.substr(what.find("] ") == std::string::npos ? 0 : what.find("] ") + 2);
    if (auto p = text.find("; last read:"); p != std::string::npos) text.erase(p);
    const std::string at_prefix = "parse error at ";
    if (text.compare(0, at_prefix.size(), at_prefix) == 0) {
        const std::size_t colon = text.find(": ");
        const std::string where = text.substr(at_prefix.size(), colon - at_prefix.size());
        std::string reason = colon == std::string::npos ? "" : text.substr(colon + 2);
        if (auto dash = reason.find(" - "); dash != std::string::npos) reason.erase(0, dash + 3);
        return "invalid JSON at " + where + (reason.empty() ? "" : " (" + reason + ")");
    }
    return "invalid JSON (" + text + ")";
}

std::size_t json_parse_budget() {
    constexpr std::size_t factor = 8, floor = std::size_t{64} << 20;
    const std::size_t limit = max_array_bytes();
    return std::max(limit > SIZE_MAX / factor ? SIZE_MAX : limit * factor, floor);
}

namespace {

/// Follows a JSON text's strings one byte at a time, for the passes over its bytes that
/// look only at what lies outside them: outside(c) is true for a byte outside every
/// string, false for a byte inside one and for the quotes that open and close it.
struct string_tracker {
    bool in_string = false, escaped = false;

    bool outside(char c) {
        if (in_string) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
            return false;
        }
        if (c == '"') {
            in_string = true;
            return false;
        }
        return true;
    }
};

/// The bytes nlohmann's DOM of `text` would take, estimated in one pass: about 48 bytes a
/// value (a value per ',', '[' or '{' outside strings) plus the strings' bytes.
std::size_t json_dom_estimate(std::string_view text) {
    constexpr std::size_t bytes_per_value = 48;
    std::size_t values = 1, string_bytes = 0;
    string_tracker strings;
    for (const char c : text) {
        if (strings.in_string) ++string_bytes;
        if (!strings.outside(c)) continue;
        if (c == ',' || c == '[' || c == '{') {
            ++values;
        }
    }
    return values * bytes_per_value + string_bytes;
}

}  // namespace

void check_json_parse_bytes(std::string_view text, const std::string& source) {
    const std::size_t estimate = json_dom_estimate(text);
    const std::size_t max = json_parse_budget();
    if (estimate > max)
        throw limit_error(source, "JSON too large to parse within --max-bytes " +
                                      expected_got("at most " + std::to_string(max) + " bytes",
                                                   "about " + std::to_string(estimate)));
}

void check_json_depth(std::string_view text, const std::string& source) {
    std::size_t depth = 0;
    string_tracker strings;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (!strings.outside(c)) continue;
        if (c == '[' || c == '{') {
            if (++depth > max_json_depth)
                throw format_error(source, "JSON nested too deep " +
                                               expected_got("at most " + std::to_string(max_json_depth) + " levels",
                                                            "more at byte " + std::to_string(i)));
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
}

std::size_t side_json_limit(side_json kind) {
    return kind == side_json::tokenizer ? std::size_t{256} << 20 : std::size_t{16} << 20;
}

std::string read_side_json(const std::string& path, side_json kind) {
    const char* name = kind == side_json::config ? "config.json"
                       : kind == side_json::index ? "safetensors index"
                                                  : "tokenizer.json";
    const std::size_t limit = side_json_limit(kind);
    std::string text = read_file_at_most(path, limit, std::string(name) + " too large");
    // config.json as Python's json writes it (docs/design.md §6.1): bare Infinity, -Infinity
    // and NaN (Nemotron-H's time_step_limit [0.0, Infinity]) read as those strings.
    if (kind == side_json::config)
        if (std::optional<std::string> quoted = quote_bare_nonfinite(text)) text = std::move(*quoted);
    check_json_depth(text, path);
    const std::size_t estimate = json_dom_estimate(text), budget = 4 * limit;
    if (estimate > budget)
        throw limit_error(path, std::string(name) + " too large to parse " +
                                    expected_got("at most " + std::to_string(budget) + " bytes",
                                                 "about " + std::to_string(estimate)));
    // An index is parsed by its reader's own SAX handler, which is that one parse.
    if (kind == side_json::index) return text;
    // One parse that keeps nothing: the callers' parses then cannot fail on the text.
    struct check_only : nlohmann::json_sax<json> {
        std::string error;
        bool null() override { return true; }
        bool boolean(bool) override { return true; }
        bool number_integer(number_integer_t) override { return true; }
        bool number_unsigned(number_unsigned_t) override { return true; }
        bool number_float(number_float_t, const string_t&) override { return true; }
        bool string(string_t&) override { return true; }
        bool binary(binary_t&) override { return true; }
        bool start_object(std::size_t) override { return true; }
        bool key(string_t&) override { return true; }
        bool end_object() override { return true; }
        bool start_array(std::size_t) override { return true; }
        bool end_array() override { return true; }
        bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
            error = e.what();
            return false;
        }
    } handler;
    bool ok = false;
    try {
        ok = json::sax_parse(text.begin(), text.end(), &handler, json::input_format_t::json, true);
    } catch (const json::exception& e) {
        handler.error = e.what();
    }
    if (!ok) throw format_error(path, handler.error.empty() ? "invalid JSON" : json_error_text(handler.error));
    return text;
}

std::optional<std::string> quote_bare_nonfinite(std::string_view text) {
    static constexpr std::pair<std::string_view, std::string_view> bare[] = {
        {"-Infinity", "\"-Infinity\""}, {"Infinity", "\"Infinity\""}, {"NaN", "\"NaN\""}};
    std::optional<std::string> out;
    std::size_t copied = 0;
    string_tracker strings;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (!strings.outside(c)) continue;
        if (c != 'N' && c != 'I' && c != '-') continue;
        for (const auto& [word, quoted] : bare) {
            if (text.substr(i, word.size()) != word) continue;
            if (!out) out.emplace().reserve(text.size() + 64);
            out->append(text.substr(copied, i - copied));
            out->append(quoted);
            copied = i + word.size();
            i = copied - 1;
            break;
        }
    }
    if (out) out->append(text.substr(copied));
    return out;
}

bundle read_json(std::string_view raw, const std::string& source) {
    check_json_parse_bytes(raw, source);
    check_json_depth(raw, source);
    const std::optional<std::string> quoted = quote_bare_nonfinite(raw);
    const std::string_view text = quoted ? std::string_view(*quoted) : raw;
    json doc;
    try {
        doc = json::parse(text.begin(), text.end());
    } catch (const json::parse_error& e) {
        throw format_error(source, json_error_text(e.what()));
    } catch (const json::exception& e) {
        // e.g. out_of_range.406 "number overflow parsing '1e999'"
        throw format_error(source, json_error_text(e.what()));
    }

    bundle b;
    if (doc.is_array()) {
        b.arrays.push_back({"x", to_array(doc, source)});
        return b;
    }
    if (!doc.is_object())
        throw format_error(source, "not an attn JSON input " + expected_got("a list or an object", describe(doc)));
    for (const auto& [key, value] : doc.items()) {
        const std::string name = lower(key);
        const std::string where = source + ":" + key;
        if (name == "tokens" && value.is_array() && !value.empty() && value.front().is_array()) {
            // attn's own output of a batch whose items differ: one list per item, which
            // meta.model.tokens holds too (plot and view read them there).
            continue;
        }
        if (name == "tokens" || name == "tokens_kv" || name == "words") {
            (name == "tokens" ? b.tokens : name == "words" ? b.words : b.tokens_kv) = to_tokens(value, where);
            continue;
        }
        if (!value.is_array()) continue;  // settings, metadata: not ours to judge
        for (const auto& existing : b.arrays)
            if (existing.name == name)
                throw format_error(where, "duplicate array name " + expected_got("each name once, ignoring case",
                                                                                 "'" + name + "' twice"));
        if (is_attn_name(name)) {
            b.arrays.push_back({name, to_array(value, where)});
            continue;
        }
        // Unknown names are ignored unless they read as an array (a lone one is X); an
        // array over --max-bytes is refused all the same, as an .npz member would be.
        try {
            b.arrays.push_back({name, to_array(value, where)});
        } catch (const format_error&) {
        } catch (const limit_error&) {
            throw;
        } catch (const value_error&) {
        }
    }
    return b;
}

}  // namespace attn::io
