// Safetensors checkpoints (include/attn/io/safetensors.hpp): the header is parsed with
// nlohmann/json's SAX interface into entries directly, so that a hostile 100 MB header
// ("[[[[…") costs no more memory than its text, and checked as the reference reader
// (huggingface/safetensors, safetensors/src/tensor.rs: read_metadata, Metadata::validate)
// checks it, with a message naming the tensor. Data stays in a read-only mapping.

#include "detail.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/io/json.hpp"
#include "attn/io/safetensors.hpp"
#include "attn/text.hpp"

namespace attn::io {

namespace safetensors_detail {

namespace {

using json = nlohmann::json;

constexpr std::size_t prefix_bytes = 8;
constexpr std::string_view header_context = "safetensors header: ";
constexpr std::string_view index_context = "safetensors index: ";
constexpr std::string_view index_suffix = ".safetensors.index.json";

/// Every dtype the format defines (safetensors/src/tensor.rs, enum Dtype), with its
/// width in bits. A header may use any of them; load() reads those attn computes with.
struct stored_type {
    std::string_view name;
    std::size_t bits;
};
constexpr stored_type stored_types[] = {
    {"BOOL", 8},        {"F4", 4},           {"F6_E2M3", 6},      {"F6_E3M2", 6}, {"U8", 8},   {"I8", 8},
    {"F8_E5M2", 8},     {"F8_E4M3", 8},      {"F8_E8M0", 8},      {"F8_E4M3FNUZ", 8},          {"F8_E5M2FNUZ", 8},
    {"I16", 16},        {"U16", 16},         {"F16", 16},         {"BF16", 16},   {"I32", 32}, {"U32", 32},
    {"F32", 32},        {"C64", 64},         {"F64", 64},         {"I64", 64},    {"U64", 64}};

const stored_type* find_type(std::string_view name) {
    for (const auto& t : stored_types)
        if (t.name == name) return &t;
    return nullptr;
}

std::string known_type_list() {
    std::string s;
    for (const auto& t : stored_types) s += (s.empty() ? "" : ", ") + std::string(t.name);
    return s;
}

std::string offsets_text(std::size_t begin, std::size_t end) {
    return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

/// The index of the first byte of `s` that is not well-formed UTF-8 (Unicode Table 3-7),
/// or nullopt. RFC 8259 §8.1: a JSON text is UTF-8; the reference reader checks it first.
std::optional<std::size_t> first_bad_utf8(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        const std::size_t n = utf8_sequence_length(s, i);
        if (n == 0 || i + n > s.size()) return i;
        i += n;
    }
    return std::nullopt;
}

/// Base of the two SAX handlers: the events as virtual calls on a value kind, an error
/// message that stops the parse, and skipping of values the reader does not use.
class sax_base : public nlohmann::json_sax<json> {
public:
    std::string error;  ///< set when a handler refused the document

    bool null() override { return scalar("null"); }
    bool boolean(bool) override { return scalar("a boolean"); }
    bool number_integer(number_integer_t v) override {
        if (skip_) return skip_scalar();
        return on_integer(v < 0, v < 0 ? 0 : static_cast<std::uint64_t>(v), v);
    }
    bool number_unsigned(number_unsigned_t v) override {
        if (skip_) return skip_scalar();
        return on_integer(false, v, 0);
    }
    bool number_float(number_float_t, const string_t& text) override {
        if (skip_) return skip_scalar();
        return on_other("the number " + text);
    }
    bool string(string_t& s) override {
        if (skip_) return skip_scalar();
        return on_string(s);
    }
    bool binary(binary_t&) override { return scalar("binary data"); }
    bool start_object(std::size_t) override {
        if (++depth_ > max_json_depth) return too_deep();
        if (skip_) return ++depth_skipped_, true;
        return on_start_object();
    }
    bool end_object() override {
        --depth_;
        if (skip_) return skip_end();
        return on_end_object();
    }
    bool start_array(std::size_t) override {
        if (++depth_ > max_json_depth) return too_deep();
        if (skip_) return ++depth_skipped_, true;
        return on_start_array();
    }
    bool end_array() override {
        --depth_;
        if (skip_) return skip_end();
        return on_end_array();
    }
    bool key(string_t& k) override {
        if (skip_ && depth_skipped_ > 0) return true;
        return on_key(k);
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
        if (error.empty()) error = json_error_text(e.what());
        return false;
    }

protected:
    /// The next value is not used: it and everything inside it are passed over.
    void skip_next() {
        skip_ = true;
        depth_skipped_ = 0;
    }
    bool fail(std::string message) {
        error = std::move(message);
        return false;
    }
    static std::string kind_of_start(bool object) { return object ? "an object" : "a list"; }

    virtual bool on_integer(bool negative, std::uint64_t value, std::int64_t signed_value) = 0;
    virtual bool on_other(const std::string& what) = 0;
    virtual bool on_string(const std::string& s) = 0;
    virtual bool on_start_object() = 0;
    virtual bool on_end_object() = 0;
    virtual bool on_start_array() = 0;
    virtual bool on_end_array() = 0;
    virtual bool on_key(const std::string& k) = 0;

private:
    bool scalar(const std::string& what) {
        if (skip_) return skip_scalar();
        return on_other(what);
    }
    bool skip_scalar() {
        if (depth_skipped_ == 0) skip_ = false;
        return true;
    }
    bool skip_end() {
        if (--depth_skipped_ == 0) skip_ = false;
        return true;
    }
    /// Skipped values cost nothing, but nesting is bounded everywhere attn reads JSON.
    bool too_deep() {
        error = "JSON nested too deep " + expected_got("at most " + std::to_string(max_json_depth) + " levels", "more");
        return false;
    }
    bool skip_ = false;
    std::size_t depth_skipped_ = 0;
    std::size_t depth_ = 0;
};

/// The header {"NAME": {"dtype", "shape", "data_offsets"}, "__metadata__": {str: str}}.
class header_handler final : public sax_base {
public:
    std::vector<tensor_entry> entries;
    std::map<std::string, std::string> metadata;

private:
    enum class where { top, root, metadata, tensor, list };
    where at_ = where::top;
    bool done_ = false;
    std::string name_;                ///< the current top-level key
    std::string field_;               ///< the current key inside a tensor (or metadata key)
    std::set<std::string> seen_;      ///< top-level keys so far
    std::set<std::string> fields_;    ///< fields of the current tensor so far
    tensor_entry entry_;
    std::vector<std::uint64_t> list_;

    std::string tensor_context() const { return "tensor " + in_quotes(name_) + ": "; }

    bool on_integer(bool negative, std::uint64_t value, std::int64_t signed_value) override {
        if (at_ == where::list) {
            if (negative) {
                if (field_ == "shape")
                    return fail(tensor_context() + "shape has a negative dimension " + std::to_string(signed_value) +
                                " (expected non-negative integers)");
                return fail(tensor_context() + "data_offsets has a negative offset " + std::to_string(signed_value) +
                            " (expected non-negative integers)");
            }
            if (value > std::numeric_limits<std::size_t>::max())
                return fail(tensor_context() + field_ + " value " + std::to_string(value) + " is too large");
            list_.push_back(value);
            return true;
        }
        return on_other("the number " + (negative ? std::to_string(signed_value) : std::to_string(value)));
    }

    bool on_other(const std::string& what) override {
        switch (at_) {
            case where::top: return fail("not a JSON object (got " + what + ")");
            case where::root:
                if (name_ == "__metadata__")
                    return fail("\"__metadata__\" " + expected_got("an object of strings", what));
                return fail(tensor_context() + "not an object " +
                            expected_got("{dtype, shape, data_offsets}", what));
            case where::metadata:
                return fail("\"__metadata__\" entry " + in_quotes(field_) + " " + expected_got("a string", what));
            case where::tensor: return fail(tensor_context() + field_ + " " + expected_got(field_ == "dtype" ? "a string" : "a list of integers", what));
            case where::list:
                return fail(tensor_context() + field_ + " " + expected_got("non-negative integers", what));
        }
        return false;
    }

    bool on_string(const std::string& s) override {
        if (at_ == where::metadata) {
            metadata[field_] = s;
            return true;
        }
        if (at_ == where::tensor && field_ == "dtype") {
            entry_.dtype = s;
            return true;
        }
        std::string shown = s.size() > 40 ? s.substr(0, 40) + "..." : s;
        return on_other("the string " + in_quotes(shown));
    }

    bool on_start_object() override {
        switch (at_) {
            case where::top: at_ = where::root; return true;
            case where::root:
                if (name_ == "__metadata__") {
                    at_ = where::metadata;
                    return true;
                }
                at_ = where::tensor;
                entry_ = tensor_entry{};
                entry_.name = name_;
                fields_.clear();
                return true;
            default: return on_other("an object");
        }
    }

    bool on_start_array() override {
        if (at_ == where::tensor && (field_ == "shape" || field_ == "data_offsets")) {
            at_ = where::list;
            list_.clear();
            return true;
        }
        return on_other("a list");
    }

    bool on_end_array() override {
        // Only a list the handler opened gets here (others are refused or skipped).
        at_ = where::tensor;
        if (field_ == "shape") {
            entry_.shape.assign(list_.begin(), list_.end());
        } else {
            if (list_.size() != 2)
                return fail(tensor_context() + "data_offsets " +
                            expected_got("[begin, end]", std::to_string(list_.size()) + " numbers"));
            entry_.begin = list_[0];
            entry_.end = list_[1];
        }
        return true;
    }

    bool on_key(const std::string& k) override {
        switch (at_) {
            case where::root:
                name_ = k;
                if (!seen_.insert(k).second) return fail("duplicate tensor name " + in_quotes(k) + " (expected each name once)");
                return true;
            case where::metadata: field_ = k; return true;
            case where::tensor:
                field_ = k;
                if (k != "dtype" && k != "shape" && k != "data_offsets") {
                    skip_next();  // the reference reader ignores other fields too
                    return true;
                }
                if (!fields_.insert(k).second) return fail(tensor_context() + "duplicate field " + in_quotes(k));
                return true;
            default: return fail("unexpected key " + in_quotes(k));
        }
    }

    bool on_end_object() override {
        switch (at_) {
            case where::metadata: at_ = where::root; return true;
            case where::tensor: {
                at_ = where::root;
                for (const char* f : {"dtype", "shape", "data_offsets"})
                    if (!fields_.count(f)) return fail(tensor_context() + "no \"" + f + "\" field");
                if (!find_type(entry_.dtype))
                    return fail(tensor_context() + "unknown dtype " + in_quotes(entry_.dtype) + " (expected one of " +
                                known_type_list() + ")");
                entries.push_back(std::move(entry_));
                return true;
            }
            case where::root: at_ = where::top; done_ = true; return true;
            default: return false;
        }
    }
};

/// A *.safetensors.index.json: {"metadata": {...}, "weight_map": {NAME: SHARD}}.
class index_handler final : public sax_base {
public:
    std::vector<std::pair<std::string, std::string>> weight_map;
    bool has_weight_map = false;

private:
    enum class where { top, root, map };
    where at_ = where::top;
    std::string name_;
    std::set<std::string> seen_;

    bool on_integer(bool negative, std::uint64_t value, std::int64_t signed_value) override {
        return on_other("the number " + (negative ? std::to_string(signed_value) : std::to_string(value)));
    }
    bool on_other(const std::string& what) override {
        if (at_ == where::top) return fail("not a JSON object (got " + what + ")");
        if (at_ == where::root) return fail("\"weight_map\" " + expected_got("an object {NAME: SHARD}", what));
        return fail("weight_map entry " + in_quotes(name_) + " " + expected_got("a shard file name", what));
    }
    bool on_string(const std::string& s) override {
        if (at_ != where::map) return on_other("a string");
        weight_map.emplace_back(name_, s);
        return true;
    }
    bool on_start_object() override {
        if (at_ == where::top) {
            at_ = where::root;
            return true;
        }
        if (at_ == where::root) {
            at_ = where::map;
            has_weight_map = true;
            return true;
        }
        return on_other("an object");
    }
    bool on_end_object() override {
        at_ = at_ == where::map ? where::root : where::top;
        return true;
    }
    bool on_start_array() override { return on_other("a list"); }
    bool on_end_array() override { return false; }
    bool on_key(const std::string& k) override {
        if (at_ == where::root) {
            if (k != "weight_map") skip_next();  // "metadata" ({"total_size": …}) and anything else
            else if (has_weight_map) return fail("duplicate key \"weight_map\"");
            return true;
        }
        name_ = k;
        if (!seen_.insert(k).second) return fail("weight_map names " + in_quotes(k) + " twice (expected each name once)");
        return true;
    }
};

/// Runs a SAX parse; throws format_error(source, context + message) on any refusal.
void parse_with(sax_base& handler, std::string_view text, const std::string& source, std::string_view context) {
    bool ok = false;
    try {
        ok = json::sax_parse(text.begin(), text.end(), &handler, json::input_format_t::json, true);
    } catch (const json::exception& e) {
        if (handler.error.empty()) handler.error = json_error_text(e.what());
    }
    if (!ok || !handler.error.empty())
        throw format_error(source, std::string(context) + (handler.error.empty() ? "invalid JSON" : handler.error));
}

/// element count × bits / 8, or nullopt on overflow or a size that is not whole bytes.
std::optional<std::size_t> byte_count(const shape_t& shape, std::size_t bits, bool& misaligned) {
    std::size_t n = 1;
    for (std::size_t d : shape)
        if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
    std::size_t total_bits = 0;
    if (__builtin_mul_overflow(n, bits, &total_bits)) return std::nullopt;
    misaligned = total_bits % 8 != 0;
    return total_bits / 8;
}

/// Checks the header of one file held in `bytes` and returns its entries sorted by
/// begin offset (the reference reader's order for validate()).
struct parsed_file {
    std::vector<tensor_entry> entries;
    std::map<std::string, std::string> metadata;
    std::size_t data_start = 0;
};

parsed_file parse_file(const region& bytes, const std::string& source) {
    const std::string ctx(header_context);
    if (bytes.size < prefix_bytes)
        throw format_error(source, ctx + "file too short for the 8-byte header length " +
                                       expected_got("at least 8 bytes", std::to_string(bytes.size)));
    std::uint64_t n = 0;
    for (std::size_t i = 0; i < prefix_bytes; ++i) n |= std::uint64_t(std::to_integer<unsigned char>(bytes.data[i])) << (8 * i);
    if (n > safetensors_max_header_bytes)
        throw format_error(source, ctx + "length " + std::to_string(n) + " over the limit " +
                                       expected_got("at most " + std::to_string(safetensors_max_header_bytes) + " bytes",
                                                    std::to_string(n)));
    const std::size_t available = bytes.size - prefix_bytes;
    if (n > available)
        throw format_error(source, ctx + "length " + std::to_string(n) + " beyond the end of the file " +
                                       expected_got("at most " + std::to_string(available) + " bytes after the length",
                                                    std::to_string(n)));
    const std::string_view text(reinterpret_cast<const char*>(bytes.data) + prefix_bytes, static_cast<std::size_t>(n));
    // nlohmann skips a byte order mark; the reference reader (serde_json) refuses one.
    if (text.substr(0, 3) == "\xEF\xBB\xBF")
        throw format_error(source, ctx + "starts with a UTF-8 byte order mark (expected '{' at offset 8)");
    if (auto bad = first_bad_utf8(text)) {
        static constexpr char hex[] = "0123456789abcdef";
        const auto c = static_cast<unsigned char>(text[*bad]);
        throw format_error(source, ctx + "not UTF-8 text (byte 0x" + std::string{hex[c >> 4], hex[c & 15]} +
                                       " at offset " + std::to_string(prefix_bytes + *bad) + ")");
    }
    header_handler h;
    parse_with(h, text, source, header_context);

    parsed_file out;
    out.data_start = prefix_bytes + static_cast<std::size_t>(n);
    out.metadata = std::move(h.metadata);
    out.entries = std::move(h.entries);
    const std::size_t data_size = bytes.size - out.data_start;
    std::stable_sort(out.entries.begin(), out.entries.end(), [](const tensor_entry& a, const tensor_entry& b) {
        return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
    });
    std::size_t start = 0;
    const tensor_entry* previous = nullptr;
    for (const auto& e : out.entries) {
        const std::string tctx = ctx + "tensor " + in_quotes(e.name) + ": data_offsets " + offsets_text(e.begin, e.end);
        if (e.end < e.begin) throw format_error(source, tctx + " end before they begin");
        if (e.end > data_size)
            throw format_error(source, tctx + " out of bounds " +
                                           expected_got("an end within the " + std::to_string(data_size) +
                                                            " bytes of data", std::to_string(e.end)));
        if (e.begin < start)
            throw format_error(source, tctx + " overlap tensor " + in_quotes(previous->name) + " at " +
                                           offsets_text(previous->begin, previous->end));
        if (e.begin > start)
            throw format_error(source, tctx + " leave a gap " +
                                           expected_got("begin " + std::to_string(start) +
                                                            (previous ? ", where " + in_quotes(previous->name) + " ends"
                                                                      : ", the start of the data"),
                                                        std::to_string(e.begin)));
        bool misaligned = false;
        const stored_type* t = find_type(e.dtype);
        const std::optional<std::size_t> need = byte_count(e.shape, t->bits, misaligned);
        if (!need) throw format_error(source, ctx + "tensor " + in_quotes(e.name) + ": shape " + shape_string(e.shape) + " " + e.dtype + " overflows");
        if (misaligned)
            throw format_error(source, ctx + "tensor " + in_quotes(e.name) + ": shape " + shape_string(e.shape) + " " + e.dtype +
                                           " is not a whole number of bytes");
        if (e.end - e.begin != *need)
            throw format_error(source, tctx + " hold " + std::to_string(e.end - e.begin) + " bytes, shape " +
                                           shape_string(e.shape) + " " + e.dtype + " needs " + std::to_string(*need));
        start = e.end;
        previous = &e;
    }
    if (start != data_size)
        throw format_error(source, ctx + "data section of " + std::to_string(data_size) + " bytes not used to its end " +
                                       expected_got("the last tensor to end at " + std::to_string(data_size),
                                                    std::to_string(start)));
    return out;
}

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

/// The folder of `path` with a trailing '/', or "" for a bare file name.
std::string folder_of(const std::string& path) {
    const std::size_t slash = path.rfind('/');
    return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

}  // namespace

std::string in_quotes(const std::string& name) { return "\"" + name + "\""; }

bool starts_with_brace(std::string_view bytes) {
    if (bytes.substr(0, 3) == "\xEF\xBB\xBF") bytes.remove_prefix(3);
    const std::size_t first = bytes.find_first_not_of(" \t\r\n");
    return first != std::string_view::npos && bytes[first] == '{';
}

void add_file(checkpoint::state& s, const std::string& file, std::shared_ptr<const region> bytes,
              const std::vector<std::string>* only) {
    parsed_file p = parse_file(*bytes, file);
    const std::size_t shard = s.shards.size();
    s.shards.push_back({file, std::move(bytes), p.data_start});
    for (auto& e : p.entries) {
        if (only && !std::binary_search(only->begin(), only->end(), e.name)) continue;
        e.file = file;
        s.entries.push_back(std::move(e));
        s.shard_of.push_back(shard);
    }
    if (s.metadata.empty()) s.metadata = std::move(p.metadata);
}

void sort_entries(checkpoint::state& s) {
    std::vector<std::size_t> order(s.entries.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return s.entries[a].name < s.entries[b].name; });
    std::vector<tensor_entry> entries;
    std::vector<std::size_t> shard_of;
    entries.reserve(order.size());
    shard_of.reserve(order.size());
    for (std::size_t i : order) {
        entries.push_back(std::move(s.entries[i]));
        shard_of.push_back(s.shard_of[i]);
    }
    s.entries = std::move(entries);
    s.shard_of = std::move(shard_of);
}

void open_index(checkpoint::state& s, const std::string& path) {
    const std::string text = read_side_json(path, side_json::index);
    if (auto bad = first_bad_utf8(text))
        throw format_error(path, std::string(index_context) + "not UTF-8 text (at offset " + std::to_string(*bad) + ")");
    index_handler h;
    parse_with(h, text, path, index_context);
    if (!h.has_weight_map) throw format_error(path, std::string(index_context) + "no \"weight_map\" object");
    // Shards in order of first mention, each with the names the index maps to it.
    // A hash map finds each name's shard in constant time: 200 000 distinct shard names
    // took minutes with a linear search.
    std::vector<std::pair<std::string, std::vector<std::string>>> shards;
    std::unordered_map<std::string, std::size_t> shard_index;
    for (const auto& mapped : h.weight_map) {
        const std::string& name = mapped.first;
        const std::string& shard = mapped.second;
        if (shard.empty() || shard.front() == '/' || shard == ".." || shard.rfind("../", 0) == 0 ||
            shard.find("/../") != std::string::npos || ends_with(shard, "/..") || shard.find('\0') != std::string::npos)
            throw format_error(path, std::string(index_context) + "weight_map entry " + in_quotes(name) + " " +
                                         expected_got("a shard file beside the index",
                                                      shard.find('\0') != std::string::npos ? "a name holding a NUL byte"
                                                                                             : in_quotes(shard)));
        auto [it, added] = shard_index.try_emplace(shard, shards.size());
        if (added) {
            if (shards.size() == safetensors_max_shards)
                throw format_error(path, std::string(index_context) + "too many shards " +
                                             expected_got("at most " + std::to_string(safetensors_max_shards),
                                                          "more"));
            shards.push_back({shard, {}});
        }
        shards[it->second].second.push_back(name);
    }
    const std::string folder = folder_of(path);
    for (auto& [shard, names] : shards) {
        const std::string file = folder + shard;
        std::shared_ptr<region> bytes;
        try {
            bytes = map_file(file);
        } catch (const io_error& e) {
            throw io_error(path, std::string(index_context) + "shard " + in_quotes(shard) + ": " + e.message());
        }
        std::sort(names.begin(), names.end());
        const std::size_t before = s.entries.size();
        add_file(s, file, std::move(bytes), &names);
        if (s.entries.size() - before != names.size()) {
            std::vector<std::string> held;
            for (std::size_t i = before; i < s.entries.size(); ++i) held.push_back(s.entries[i].name);
            std::sort(held.begin(), held.end());
            for (const auto& n : names)
                if (!std::binary_search(held.begin(), held.end(), n))
                    throw format_error(path, std::string(index_context) + "weight_map maps tensor " + in_quotes(n) +
                                                 " to shard " + in_quotes(shard) + ", which does not hold it");
        }
    }
}

}  // namespace safetensors_detail

using namespace safetensors_detail;

bool looks_like_safetensors(std::string_view bytes) {
    if (bytes.size() < prefix_bytes + 1) return false;
    std::uint64_t n = 0;
    for (std::size_t i = 0; i < prefix_bytes; ++i) n |= std::uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
    return n >= 2 && n <= safetensors_max_header_bytes && bytes[prefix_bytes] == '{';
}

bool is_safetensors_index_name(const std::string& path) { return ends_with(path, index_suffix); }

}  // namespace attn::io
