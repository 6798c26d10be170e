// attn view's page (io/html.hpp): the document's Tq×Tk stages quantised layer by layer,
// deflated and base64-encoded into one data block per layer ("chunks", written as the
// layers come), then a JSON block of what the page shows, with the script and styles of
// src/io/html/ inline.
#include "attn/io/html.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <optional>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include "attn/error.hpp"
#include "attn/io/plot.hpp"
#include "attn/io/writers.hpp"
#include "attn/text.hpp"

namespace attn::io {

namespace {

const char* const view_js =
#include "html/view.js.inc"
    ;
const char* const view_css =
#include "html/view.css.inc"
    ;

/// A stage seen as (L, B, H, Tq, Tk).
struct stage_dims {
    std::size_t L = 1, B = 1, H = 1, Tq = 1, Tk = 1;
    std::size_t cells() const { return L * B * H * Tq * Tk; }
};

stage_dims dims_of(const document& doc, const named_array& t) {
    const shape_t& s = t.value.shape;
    // A rank-5 array is (L, B, H, Tq, Tk) even without meta (HF output_attentions stacked).
    const std::size_t layers = s.size() == 5 || has_layer_axis(tensor_axes(doc, t)) ? 1 : 0;
    if (s.size() < 2 + layers || s.size() > 4 + layers)
        throw shape_error(t.name, "cannot be viewed as Tq×Tk matrices " +
                                      expected_got(layers ? "rank 3 to 5 with a layer axis" : "rank 2 to 4", shape_string(s)));
    stage_dims d;
    if (layers) d.L = s[0];
    const std::size_t r = s.size() - layers;
    d.Tq = s[s.size() - 2];
    d.Tk = s.back();
    if (r == 3) (leading_axis_is_heads(doc, t) ? d.H : d.B) = s[layers];
    if (r == 4) d.B = s[layers], d.H = s[layers + 1];
    return d;
}

std::vector<const named_array*> viewed(const document& doc) {
    std::vector<const named_array*> out;
    for (const std::string& name : drawn_stages())
        for (const auto& t : doc.tensors)
            if (t.name == name) out.push_back(&t);
    return out;
}

/// The cells of stage `t` the page draws masked: masked_cells; and of word_weights, their
/// exact zeros. A word's weight is the sum of its tokens' weights (docs/design.md §5.3), 0
/// only where the mask hides every one of them (a causal mask above the diagonal), drawn
/// grey as the weights' masked cells are rather than as a weight of 0.
std::vector<char> page_masked(const document& doc, const named_array& t) {
    std::vector<char> masked = masked_cells(doc, t);
    if (tensor_kind(t.name) == stage_kind::words) {
        masked.resize(t.value.size());
        for (std::size_t i = 0; i < masked.size(); ++i) masked[i] = masked[i] || t.value.value(i) == 0;
    }
    return masked;
}

/// What a stage (or the rollout) of the page records of itself, apart from its codes: its
/// dimensions (L = the layers it has in all) and each layer's range as its chunk was
/// written.
struct stage_record {
    std::string name;
    stage_dims d;
    bool unit_range = false;              // weights, word weights and rollout: coloured over [0, 1]
    std::vector<std::array<double, 2>> layers;  // each layer's [lo, hi]
    std::vector<char> finite;                   // whether that layer had a cell not masked
};

/// Base64 (RFC 4648, with padding) written as the bytes come: whole groups of three at
/// once, the last one or two bytes held until finish().
class base64_writer {
public:
    explicit base64_writer(std::ostream& out) : out_(out) {}
    void add(const unsigned char* bytes, std::size_t n) {
        std::size_t i = 0;
        while (held_ < 3 && i < n && held_ > 0) group_[held_++] = bytes[i++];
        if (held_ == 3) emit(group_), held_ = 0;
        std::string text;
        text.reserve((n - i) / 3 * 4);
        for (; i + 2 < n; i += 3) text.append(encode(bytes + i));
        out_ << text;
        for (; i < n; ++i) group_[held_++] = bytes[i];
    }
    void finish() {
        if (held_ == 0) return;
        const unsigned v = (group_[0] << 16) | (held_ > 1 ? group_[1] << 8 : 0);
        const char tail[4] = {table[v >> 18], table[(v >> 12) & 63], held_ > 1 ? table[(v >> 6) & 63] : '=', '='};
        out_.write(tail, 4);
        held_ = 0;
    }

private:
    static constexpr char table[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    static std::string encode(const unsigned char* b) {
        const unsigned v = (b[0] << 16) | (b[1] << 8) | b[2];
        return {table[v >> 18], table[(v >> 12) & 63], table[(v >> 6) & 63], table[v & 63]};
    }
    void emit(const unsigned char* b) { out_ << encode(b); }
    std::ostream& out_;
    unsigned char group_[3] = {};
    std::size_t held_ = 0;
};

/// One layer of a stage as one `<script class="attn-chunk">` of input `input`, stage `key`
/// (its index, or the rollout's stage name), layer `layer`, its cells coming in pieces
/// (add): each quantised to codes 0 … top−1 over [lo, hi] (given before the first cell),
/// top = masked or not finite, deflated (zlib's deflate, RFC 1950, which the page's
/// DecompressionStream("deflate") reads; level 1, as compress2 at level 1 gives it,
/// whatever the pieces) and base64-encoded as they come. finish() closes the chunk and
/// records the layer's range and whether any cell was not masked in `rec`.
class chunk_writer {
public:
    chunk_writer(std::ostream& out, std::size_t input, const std::string& key, std::size_t layer, double lo, double hi,
                 int bits, stage_record& rec)
        : out_(out), text_(out), lo_(lo), hi_(hi), bits_(bits), top_(bits == 16 ? 65535u : 255u), rec_(rec) {
        if (rec.layers.size() != layer) throw value_error(rec.name, "layers of the page out of order");
        if (deflateInit(&z_, 1) != Z_OK) throw io_error("view", "cannot compress the page's data (zlib)");
        // base64 holds no '<', so the chunk cannot close its script early.
        out << "<script type=\"application/octet-stream\" class=\"attn-chunk\" data-input=\"" << input << "\" data-stage=\""
            << key << "\" data-layer=\"" << layer << "\">";
    }
    ~chunk_writer() { deflateEnd(&z_); }
    chunk_writer(const chunk_writer&) = delete;
    chunk_writer& operator=(const chunk_writer&) = delete;

    /// Cells [begin, begin + n) of `a`, masked where `masked[i]` (when given), where 0 when
    /// `zeros` (lone weights: masked_cells), or where not finite.
    void add(const array& a, std::size_t begin, std::size_t n, const char* masked, bool zeros = false) {
        if (a.type == dtype::f4 && !a.data.empty())
            add_values(reinterpret_cast<const float*>(a.data.data()) + begin, n, masked, zeros);
        else if (a.type == dtype::f8 && !a.data.empty())
            add_values(reinterpret_cast<const double*>(a.data.data()) + begin, n, masked, zeros);
        else
            add_values([&](std::size_t i) { return a.value(begin + i); }, n, masked, zeros);
    }

    /// Ends the deflate stream and the chunk; records the layer in `rec`.
    void finish() {
        compress(nullptr, 0, Z_FINISH);
        text_.finish();
        out_ << "</script>\n";
        rec_.layers.push_back({lo_, hi_});
        rec_.finite.push_back(any_ ? 1 : 0);
    }

private:
    template <class T>
    void add_values(const T* values, std::size_t n, const char* masked, bool zeros) {
        add_values([values](std::size_t i) { return static_cast<double>(values[i]); }, n, masked, zeros);
    }
    template <class F>
    void add_values(F value, std::size_t n, const char* masked, bool zeros) {
        raw_.resize(n * static_cast<std::size_t>(bits_ / 8));
        for (std::size_t i = 0; i < n; ++i) {
            const double v = value(i);
            unsigned q = top_;
            if (!(masked && masked[i]) && !(zeros && v == 0) && std::isfinite(v)) {
                any_ = true;
                const double x = hi_ > lo_ ? (v - lo_) / (hi_ - lo_) : 0.0;
                q = static_cast<unsigned>(std::lround(std::clamp(x, 0.0, 1.0) * (top_ - 1)));
            }
            if (bits_ == 16) {
                raw_[2 * i] = static_cast<unsigned char>(q & 0xff);  // little-endian, as Uint16Array reads it
                raw_[2 * i + 1] = static_cast<unsigned char>(q >> 8);
            } else {
                raw_[i] = static_cast<unsigned char>(q);
            }
        }
        compress(raw_.data(), raw_.size(), Z_NO_FLUSH);
    }
    void compress(const unsigned char* in, std::size_t n, int flush) {
        std::array<unsigned char, 1 << 16> buf;
        // zlib counts in uInt: a piece of more than 4 GiB goes in parts.
        do {
            const std::size_t part = std::min<std::size_t>(n, std::size_t{1} << 30);
            z_.next_in = const_cast<unsigned char*>(in);
            z_.avail_in = static_cast<uInt>(part);
            in += part, n -= part;
            const int mode = n ? Z_NO_FLUSH : flush;
            int status;
            do {
                z_.next_out = buf.data();
                z_.avail_out = static_cast<uInt>(buf.size());
                status = deflate(&z_, mode);
                if (status == Z_STREAM_ERROR) throw io_error("view", "cannot compress the page's data (zlib)");
                text_.add(buf.data(), buf.size() - z_.avail_out);
            } while (z_.avail_out == 0 || (mode == Z_FINISH && status != Z_STREAM_END));
        } while (n);
    }
    std::ostream& out_;
    base64_writer text_;
    double lo_, hi_;
    int bits_;
    unsigned top_;
    stage_record& rec_;
    z_stream z_{};
    std::vector<unsigned char> raw_;
    bool any_ = false;
};

/// One layer of a stage, cells [begin, begin + n) of `a` (masked where `masked`, of n
/// cells, or where not finite), quantised over the layer's own [lo, hi] ([0, 1] when
/// `unit_range`) and written as one chunk (chunk_writer). Records the layer's range in `rec`.
void write_chunk(std::ostream& out, std::size_t input, const std::string& key, std::size_t layer, const array& a,
                 std::size_t begin, std::size_t n, std::vector<char> masked, int bits, stage_record& rec) {
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (std::size_t i = 0; i < n; ++i) {
        const double v = a.value(begin + i);
        if (!std::isfinite(v)) masked[i] = 1;
        if (masked[i]) continue;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
    }
    if (rec.unit_range) lo = 0, hi = 1;
    if (!(lo <= hi)) lo = 0, hi = 1;  // everything masked
    chunk_writer chunk(out, input, key, layer, lo, hi, bits, rec);
    chunk.add(a, begin, n, masked.data());
    chunk.finish();
}

/// A stage's entry in the page's data: its dimensions, bits, the range its colours span
/// (every layer's: [0, 1] for unit ranges), the step and digits of that range, the
/// masked code and each layer's own [lo, hi], which its codes are quantised over.
nlohmann::ordered_json stage_json(const stage_record& rec, int bits) {
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (std::size_t l = 0; l < rec.layers.size(); ++l)
        if (rec.finite[l]) lo = std::min(lo, rec.layers[l][0]), hi = std::max(hi, rec.layers[l][1]);
    if (rec.unit_range) lo = 0, hi = 1;
    if (!(lo <= hi)) lo = 0, hi = 1;  // everything masked
    const unsigned top = bits == 16 ? 65535u : 255u;
    const double step = hi > lo ? (hi - lo) / (top - 1) : 0.0;
    int digits = 2;
    while (digits < 6 && step > 0 && std::pow(10.0, -(digits + 1)) > step) ++digits;  // no digit finer than a step
    nlohmann::ordered_json j;
    j["name"] = rec.name;
    j["L"] = rec.d.L, j["B"] = rec.d.B, j["H"] = rec.d.H, j["Tq"] = rec.d.Tq, j["Tk"] = rec.d.Tk;
    j["bits"] = bits;
    j["lo"] = lo, j["hi"] = hi;
    j["step"] = step;
    j["digits"] = digits;
    j["masked_code"] = top;
    j["layers"] = nlohmann::ordered_json::array();
    for (const auto& r : rec.layers) j["layers"].push_back({r[0], r[1]});
    return j;
}

/// The `rollout` tensor of `doc` ((T, T) or (B, T, T), docs/design.md §4.4) when the page
/// shows it as one more layer of the weights: the first viewed stage is the weights
/// (`first`, of dimensions `weights`) and the rollout has their batch and size; else null.
const named_array* shown_rollout(const document& doc, const std::string& first, const stage_dims& weights,
                                 stage_dims* dims = nullptr) {
    const named_array* r = nullptr;
    for (const auto& t : doc.tensors)
        if (tensor_kind(t.name) == stage_kind::rollout) r = &t;
    if (!r || tensor_kind(first) != stage_kind::weights || r->value.rank() < 2 || r->value.rank() > 3) return nullptr;
    stage_dims d;
    d.B = r->value.rank() == 3 ? r->value.shape[0] : 1;
    d.Tq = r->value.shape[r->value.rank() - 2];
    d.Tk = r->value.shape.back();
    if (d.B != weights.B || d.Tq != weights.Tq || d.Tk != weights.Tk) return nullptr;
    if (dims) *dims = d;
    return r;
}

const named_array* shown_rollout(const document& doc, const std::vector<const named_array*>& stages,
                                 stage_dims* dims = nullptr) {
    return stages.empty() ? nullptr : shown_rollout(doc, stages.front()->name, dims_of(doc, *stages.front()), dims);
}

/// head_stats.* tensors (([L,]B,H) or ([L,]H)) as table rows [layer, batch, head, …].
nlohmann::ordered_json head_stat_rows(const document& doc) {
    const stage_info& head_stats = stage_row(stage::head_stats);
    std::vector<const array*> cols;
    const named_array* first = nullptr;
    for (const std::string& n : head_stats.parts)
        for (const auto& t : doc.tensors)
            if (t.name == head_stats.name + "." + n) {
                cols.push_back(&t.value);
                if (!first) first = &t;
            }
    if (cols.size() != head_stats.parts.size()) return nullptr;
    const shape_t& s = cols[0]->shape;
    // ([L,]B,H) or ([L,]H); rank 3 is always (L, B, H); a layer axis leaves one more.
    const std::size_t layers =
        s.size() == 3 ? 1 : std::min<std::size_t>(has_layer_axis(tensor_axes(doc, *first)) ? 1 : 0, s.size() - 1);
    const std::size_t L = layers ? s[0] : 1, r = s.size() - layers;
    const std::size_t B = r == 2 ? s[layers] : 1, H = s.back();
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (std::size_t l = 0; l < L; ++l)
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t h = 0; h < H; ++h) {
                nlohmann::ordered_json row = {l, b, h};
                for (const array* c : cols) {
                    const double v = c->value((l * B + b) * H + h);
                    row.push_back(std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json());
                }
                rows.push_back(row);
            }
    return {{"rows", rows}};
}

std::string escape_html(const std::string& text) {
    std::string out;
    for (char c : text) {
        if (c == '<') out += "&lt;";
        else if (c == '>') out += "&gt;";
        else if (c == '&') out += "&amp;";
        else if (c == '"') out += "&quot;";
        else out += c;
    }
    return out;
}

/// A meta value as a person reads it: strings bare, numbers as %g, lists joined by "+".
std::string meta_text(const nlohmann::ordered_json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number_integer()) return v.dump();
    if (v.is_number()) return general_number(v.get<double>(), 6);
    if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
    if (v.is_array()) {
        std::string s;
        for (const auto& e : v) s += (s.empty() ? "" : "+") + meta_text(e);
        return v.empty() ? "none" : s;
    }
    return v.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

/// The settings and the model of `meta` as labelled fields (<dl id="meta">, or <dl` attributes`>
/// on a page of several inputs), then the texts the tokens came from (meta.model.text.texts:
/// "text", or "text 0", "text 1", … of several, each whole), every string made valid UTF-8 (valid_utf8) and escaped: a
/// checkpoint path need not be UTF-8 and a model name is not trusted markup. Empty when
/// meta is not an object.
std::string meta_html(const nlohmann::ordered_json& meta, const std::string& attributes = " id=\"meta\"") {
    if (!meta.is_object()) return "";
    std::vector<std::pair<std::string, std::string>> fields;
    const auto add = [&](const std::string& label, const nlohmann::ordered_json& v) {
        if (!v.is_null()) fields.emplace_back(label, meta_text(v));
    };
    const auto model = meta.find("model");
    if (model != meta.end() && model->is_object()) {
        const nlohmann::ordered_json& m = *model;
        std::string name = m.contains("model_type") ? meta_text(m["model_type"]) : "";
        if (m.contains("arch") && meta_text(m["arch"]) != name) name += (name.empty() ? "" : " (") + meta_text(m["arch"]) + (name.empty() ? "" : ")");
        if (!name.empty()) fields.emplace_back("model", name);
        if (m.contains("checkpoint")) add("checkpoint", m["checkpoint"]);
        if (m.contains("layer")) {
            std::string layer = meta_text(m["layer"]);
            if (m.contains("layers")) layer += " of " + meta_text(m["layers"]);
            fields.emplace_back("layer", layer);
        }
        if (m.contains("hidden_size")) add("hidden size", m["hidden_size"]);
    } else if (model != meta.end()) {
        add("model", *model);
    }
    for (const char* k : {"mask", "scale", "softcap", "heads", "kv_heads", "past_length", "dtype"})
        if (meta.contains(k)) add(std::string(k) == "kv_heads" ? "kv heads" : std::string(k) == "past_length" ? "past length" : k, meta[k]);
    // The texts the tokens came from (--text, --text-file: meta.model.text.texts), each whole.
    std::vector<std::string> texts;
    if (model != meta.end() && model->is_object() && model->contains("text") && (*model)["text"].is_object() &&
        (*model)["text"].contains("texts") && (*model)["text"]["texts"].is_array())
        for (const auto& t : (*model)["text"]["texts"])
            if (t.is_string()) texts.push_back(t.get<std::string>());
    if (fields.empty() && texts.empty()) return "";
    std::string out = "<dl" + attributes + ">";
    for (const auto& [label, value] : fields)
        out += "<div><dt>" + escape_html(label) + "</dt><dd>" + escape_html(valid_utf8(value)) + "</dd></div>";
    for (std::size_t k = 0; k < texts.size(); ++k)
        out += "<div class=\"text\"><dt>text" + (texts.size() > 1 ? " " + std::to_string(k) : std::string()) + "</dt><dd>" +
               escape_html(valid_utf8(texts[k])) + "</dd></div>";
    return out + "</dl>\n";
}

}  // namespace

int view_bits(std::size_t cells) { return cells <= (std::size_t{16} << 20) ? 16 : 8; }

namespace {

/// The Tq×Tk cells of `doc`'s viewed stages (and in `rollout`, of the rollout it shows).
/// Throws value_error(source, "no Tq×Tk stage to view …") when it has none.
std::size_t viewed_cells(const document& doc, const std::string& source, std::size_t& rollout) {
    const auto stages = viewed(doc);
    if (stages.empty()) {
        std::string found;
        for (const auto& t : doc.tensors) found += (found.empty() ? "" : ", ") + t.name;
        const std::vector<std::string> drawn = drawn_stages();
        std::string expected;
        for (std::size_t i = 0; i < drawn.size(); ++i)
            expected += (i == 0 ? "" : i + 1 == drawn.size() ? " or " : ", ") + drawn[i];
        throw value_error(source, "no Tq×Tk stage to view (expected " + expected + "; found " +
                                      (found.empty() ? std::string("none") : found) + ")");
    }
    std::size_t cells = 0;
    for (const auto* t : stages) cells += dims_of(doc, *t).cells();
    stage_dims r;
    rollout = shown_rollout(doc, stages, &r) ? r.cells() : 0;  // stored as the stages are
    return cells;
}

/// One input's chunks and the records the page's data keeps of them.
struct input_page {
    std::vector<stage_record> stages;
    std::optional<stage_record> rollout;
};

/// The record of viewed stage `t` of `doc` before any chunk: its dimensions with `layers`
/// layers, and whether it is coloured over [0, 1] (weights and word weights, whose rows
/// sum to 1).
stage_record record_of(const document& doc, const named_array& t, std::size_t layers) {
    stage_record rec;
    rec.name = t.name;
    rec.d = dims_of(doc, t);
    rec.d.L = layers;
    const stage_kind k = tensor_kind(t.name);
    rec.unit_range = k == stage_kind::weights || k == stage_kind::words;
    return rec;
}

/// Writes the rollout's one chunk, when `doc` has one the page shows, into `page`.
/// Rollout rows sum to 1 (Abnar & Zuidema 2020): coloured over [0, 1] as weights are. An
/// exact 0 is a key no path through the layers reaches (above a causal diagonal): drawn
/// as masked, as a weight of exactly 0 is when there are no scores.
void write_rollout_chunk(std::ostream& out, const document& doc, std::size_t input, int bits, input_page& page) {
    stage_dims dims;
    const named_array* r = page.stages.empty() ? nullptr : shown_rollout(doc, page.stages.front().name, page.stages.front().d, &dims);
    if (!r) return;
    stage_record rec;
    rec.name = r->name;
    rec.d = dims;
    rec.unit_range = true;
    std::vector<char> unreached(r->value.size());
    for (std::size_t i = 0; i < unreached.size(); ++i) unreached[i] = r->value.value(i) == 0;
    write_chunk(out, input, stage_name(stage::rollout), 0, r->value, 0, r->value.size(), std::move(unreached), bits, rec);
    page.rollout = std::move(rec);
}

/// Writes every viewed stage of `doc` as chunks, layer by layer (the order a stream
/// writes them), then its rollout.
input_page write_input_chunks(std::ostream& out, const document& doc, std::size_t input, int bits) {
    const auto stages = viewed(doc);
    input_page page;
    std::vector<std::vector<char>> masked;
    std::size_t layers = 0;
    for (const auto* t : stages) {
        const stage_dims d = dims_of(doc, *t);
        page.stages.push_back(record_of(doc, *t, d.L));
        masked.push_back(page_masked(doc, *t));
        layers = std::max(layers, d.L);
    }
    for (std::size_t l = 0; l < layers; ++l)
        for (std::size_t i = 0; i < stages.size(); ++i) {
            stage_record& rec = page.stages[i];
            if (l >= rec.d.L) continue;
            const std::size_t per = rec.d.cells() / rec.d.L;
            const auto from = masked[i].begin() + static_cast<std::ptrdiff_t>(l * per);
            write_chunk(out, input, std::to_string(i), l, stages[i]->value, l * per, per,
                        std::vector<char>(from, from + static_cast<std::ptrdiff_t>(per)), bits, rec);
        }
    write_rollout_chunk(out, doc, input, bits, page);
    return page;
}

/// One input's part of the page's data: its tokens, labels, stages (their records; the
/// codes are in the chunks) and rollout, and its head statistics (`head_stats`, rows or
/// null).
nlohmann::ordered_json input_data(const document& doc, const input_page& page, int bits, nlohmann::ordered_json head_stats) {
    nlohmann::ordered_json data;
    data["tokens"] = doc.tokens;
    data["tokens_kv"] = doc.tokens_kv;
    // A checkpoint run over a batch of ids that differ labels each item in meta.model.tokens.
    if (doc.tokens.empty() && doc.meta.is_object() && doc.meta.contains("model") && doc.meta["model"].is_object() &&
        doc.meta["model"].contains("tokens") && doc.meta["model"]["tokens"].is_array())
        data["item_tokens"] = doc.meta["model"]["tokens"];
    // word_weights' labels (docs/design.md §5.3): the words, or each text's in meta.model.text.words.
    data["words"] = doc.words;
    if (doc.words.empty() && doc.meta.is_object() && doc.meta.contains("model") && doc.meta["model"].is_object() &&
        doc.meta["model"].contains("text") && doc.meta["model"]["text"].is_object() && doc.meta["model"]["text"].contains("words"))
        data["item_words"] = doc.meta["model"]["text"]["words"];
    // A run of listed layers (--layer 0,5,10-12) names its layers; index i is not layer i.
    if (const std::vector<std::size_t> listed = listed_layers(doc); !listed.empty()) data["layer_names"] = listed;
    data["stages"] = nlohmann::ordered_json::array();
    for (const auto& rec : page.stages) data["stages"].push_back(stage_json(rec, bits));
    data[stage_name(stage::rollout)] = page.rollout ? stage_json(*page.rollout, bits) : nlohmann::ordered_json();  // the page's keys are the stage names
    data[stage_name(stage::head_stats)] = std::move(head_stats);
    return data;
}

/// The page up to its first chunk: the doctype, the head (title, styles) and <body>.
void write_page_head(std::ostream& out, const std::string& source) {
    out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; "
           "style-src 'unsafe-inline'; img-src data:\">\n"
        << "<title>attn view: " << escape_html(valid_utf8(source)) << "</title>\n<style>" << view_css << "</style></head>\n<body>\n";
}

/// The page after its chunks: the heading, controls, `settings` (each input's <dl>), the
/// note on quantisation, the panes, the data block (`data`, to which the colours are
/// added) and the script.
void write_page_tail(std::ostream& out, const std::string& source, const std::string& settings, bool many, int bits,
                     bool any_rollout, nlohmann::ordered_json data) {
    nlohmann::ordered_json lut = nlohmann::ordered_json::array();
    for (int k = 0; k < 256; ++k) {
        const rgb8 c = colormap(k / 255.0);
        lut.push_back({c.r, c.g, c.b});
    }
    data["lut"] = lut;
    data["masked_rgb"] = {masked_color.r, masked_color.g, masked_color.b};
    data["hatch_rgb"] = {hatch_color.r, hatch_color.g, hatch_color.b};
    std::string json = data.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    // Inside <script>: no "</script>" or "<!--" can appear once every '<' is \u003c (only
    // strings hold '<' in JSON).
    std::string safe;
    safe.reserve(json.size());
    for (char c : json) safe += c == '<' ? std::string("\\u003c") : std::string(1, c);

    const std::string levels = bits == 16 ? "65535" : "255";
    out << "<h1>attn view: " << escape_html(valid_utf8(source)) << "</h1>\n"
        << "<div class=\"controls\">" << (many ? "<label>input <select id=\"input\"></select></label>" : "")
        << "<label>stage <select id=\"stage\"></select></label>"
           "<label>layer <select id=\"layer\"></select></label><label>batch <select id=\"batch\"></select></label>"
           "<label>head <select id=\"head\"></select></label><label>view <select id=\"mode\">"
           "<option value=\"heatmap\">heatmap</option><option value=\"lines\">lines</option></select></label>"
           "<label title=\"colour by log10 of the values, as attn plot --log; values ≤ 0 grey\"><input type=\"checkbox\" id=\"log\"> "
           "log colour</label></div>\n"
        << settings << "<p class=\"note\">Values are stored quantised to " << bits
        << " bits: each stage linearly over its range in each layer (weights over [0, 1]) in " << levels
        << " levels, so a shown value is within half a step (weights: " << general_number(0.5 / (bits == 16 ? 65534 : 254), 2)
        << ") of the computed one. Masked cells (−∞ scores) are grey, hatched when large; overviews average "
           "blocks of cells."
        << (any_rollout ? " The last layer of the weights, “rollout”, is attention rollout (Abnar &amp; Zuidema 2020): "
                          "Â = ½·mean<sub>h</sub>(A) + ½·I per layer with rows renormalised, R = Â<sub>L</sub> ⋯ Â<sub>1</sub>, "
                          "the same for every head."
                        : "")
        << "</p>\n"
        << "<div id=\"where\"></div><div id=\"hover\"></div>\n"
           "<div class=\"panes\"><canvas id=\"heatmap\"></canvas><canvas id=\"lines\"></canvas>"
           "<div><h2>All heads</h2><canvas id=\"grid\"></canvas></div></div>\n"
           "<h2>Head statistics</h2><div id=\"stats\"></div>\n<pre id=\"test-result\"></pre>\n"
           "<script type=\"application/json\" id=\"attn-data\">"
        << safe << "</script>\n<script>" << view_js << "</script>\n</body></html>\n";
}

}  // namespace

std::size_t view_data_bytes(const std::vector<view_input>& inputs) {
    std::size_t cells = 0, rollouts = 0;
    for (const view_input& in : inputs) {
        std::size_t rollout = 0;
        cells += viewed_cells(*in.doc, in.name, rollout);
        rollouts += rollout;
    }
    return (cells + rollouts) * static_cast<std::size_t>(view_bits(cells) / 8);
}

std::size_t view_data_bytes(const document& doc, const std::string& source) { return view_data_bytes({{source, &doc}}); }

void write_html(std::ostream& out, const document& doc, const std::string& source) { write_html(out, {{source, &doc}}); }

void write_html(std::ostream& out, const std::vector<view_input>& inputs) {
    if (inputs.empty()) throw value_error("view", "no input to view");
    std::size_t cells = 0;
    for (const view_input& in : inputs) {
        std::size_t rollout = 0;
        cells += viewed_cells(*in.doc, in.name, rollout);
    }
    const int bits = view_bits(cells);  // of the stages: the rollout, 1/(L·H) of the weights, follows them
    const bool many = inputs.size() > 1;
    std::string source;
    for (std::size_t k = 0; k < inputs.size(); ++k) source += (k ? ", " : "") + inputs[k].name;
    write_page_head(out, source);

    // One input: its data is the page's (no "inputs"), as it was before pages of several.
    nlohmann::ordered_json data;
    bool any_rollout = false;
    std::string settings;
    if (!many) {
        const input_page page = write_input_chunks(out, *inputs[0].doc, 0, bits);
        any_rollout = page.rollout.has_value();
        data = input_data(*inputs[0].doc, page, bits, head_stat_rows(*inputs[0].doc));
        settings = meta_html(inputs[0].doc->meta);
    } else {
        data["inputs"] = nlohmann::ordered_json::array();
        for (std::size_t k = 0; k < inputs.size(); ++k) {
            const input_page page = write_input_chunks(out, *inputs[k].doc, k, bits);
            nlohmann::ordered_json one;
            one["name"] = valid_utf8(inputs[k].name);
            nlohmann::ordered_json part = input_data(*inputs[k].doc, page, bits, head_stat_rows(*inputs[k].doc));
            for (auto it = part.begin(); it != part.end(); ++it) one[it.key()] = std::move(it.value());
            data["inputs"].push_back(std::move(one));
            any_rollout = any_rollout || page.rollout.has_value();
            // Each input's settings, shown with it (the page's script switches them).
            settings += meta_html(inputs[k].doc->meta, " class=\"meta\" data-input=\"" + std::to_string(k) + "\"" +
                                                           (k ? " style=\"display:none\"" : ""));
        }
    }
    write_page_tail(out, source, settings, many, bits, any_rollout, std::move(data));
    if (!out) throw io_error(source, "write failed");
}

namespace {

/// Flushes `out`; throws io_error("", "cannot write output (<why>)") when it failed (a
/// full disk, `ulimit -f`): the caller names the destination.
void check_written(std::ostream& out) {
    out.flush();
    if (!out) throw io_error("", "cannot write output (" + std::system_category().message(errno ? errno : EIO) + ")");
}

}  // namespace

struct html_stream::impl {
    impl(std::ostream& o, std::string s) : out(o), source(std::move(s)) {}
    std::ostream& out;
    std::string source;
    bool keep_single_rollout = false;
    std::size_t count = 0, appended = 0;
    int bits = 16;
    input_page page;
    std::vector<std::pair<std::string, shape_t>> plan;  // the first layer's viewed stages
    nlohmann::ordered_json head_rows = nlohmann::ordered_json::array();
    bool head_stats = true;  // every layer had them
    // A layer in pieces (begin_layer … end_layer): its chunk, the cells it still needs.
    bool open = false;
    std::size_t cells_left = 0;
    std::unique_ptr<chunk_writer> chunk;
};

html_stream::html_stream(std::ostream& out, std::string source, bool rollout_asked)
    : p_(std::make_unique<impl>(out, std::move(source))) {
    p_->keep_single_rollout = rollout_asked;
}

html_stream::~html_stream() = default;

/// The viewed stages of `layer` checked against the page's plan (the first layer makes
/// it and writes the page's head), as append() and begin_layer() take a layer.
std::vector<const named_array*> html_stream::start_layer(const document& layer, std::size_t count) {
    impl& p = *p_;
    const auto stages = viewed(layer);
    if (p.appended == 0 && !p.open) {
        std::size_t rollout = 0;
        const std::size_t cells = viewed_cells(layer, p.source, rollout);
        p.count = count;
        p.bits = view_bits(cells * count);
        for (const auto* t : stages) {
            p.plan.emplace_back(t->name, t->value.shape);
            p.page.stages.push_back(record_of(layer, *t, count));
        }
        write_page_head(p.out, p.source);
    }
    bool same = stages.size() == p.plan.size() && p.appended < p.count && !p.open;
    for (std::size_t i = 0; same && i < stages.size(); ++i)
        same = stages[i]->name == p.plan[i].first && stages[i]->value.shape == p.plan[i].second;
    if (!same) {
        std::string want, got;
        for (const auto& [name, shape] : p.plan) want += (want.empty() ? "" : ", ") + name + " " + shape_string(shape);
        for (const auto* t : stages) got += (got.empty() ? "" : ", ") + t->name + " " + shape_string(t->value.shape);
        if (p.appended >= p.count) want = std::to_string(p.count) + " layers", got = "another";
        throw shape_error(stages.empty() ? std::string("html") : stages.front()->name,
                          "does not continue its streamed page " + expected_got(want, got));
    }
    return stages;
}

/// The layer's head statistics as rows of the page's table, numbered by the layer axis;
/// then the next layer.
void html_stream::end_layer_rows(const document& layer) {
    impl& p = *p_;
    nlohmann::ordered_json rows = head_stat_rows(layer);
    if (rows.is_null()) p.head_stats = false;
    else
        for (auto& row : rows["rows"]) {
            row[0] = p.appended;
            p.head_rows.push_back(std::move(row));
        }
    ++p.appended;
    check_written(p.out);
}

void html_stream::append(const document& layer, std::size_t count) {
    impl& p = *p_;
    const auto stages = start_layer(layer, count);
    for (std::size_t i = 0; i < stages.size(); ++i)
        write_chunk(p.out, 0, std::to_string(i), p.appended, stages[i]->value, 0, stages[i]->value.size(),
                    page_masked(layer, *stages[i]), p.bits, p.page.stages[i]);
    end_layer_rows(layer);
}

void html_stream::begin_layer(const document& layer, std::size_t count) {
    impl& p = *p_;
    for (const auto& t : layer.tensors)
        if (tensor_kind(t.name) == stage_kind::scores || tensor_kind(t.name) == stage_kind::mask)
            throw value_error(t.name, "a page in pieces takes weights alone (their masked cells are their zeros)");
    const auto stages = start_layer(layer, count);
    if (stages.size() != 1 || tensor_kind(stages.front()->name) != stage_kind::weights)
        throw value_error(stages.front()->name, "a page in pieces takes weights alone " +
                                                    expected_got(stage_name(stage::weights), stages.front()->name));
    p.open = true;
    p.cells_left = stages.front()->value.size();
    p.chunk = std::make_unique<chunk_writer>(p.out, 0, "0", p.appended, 0.0, 1.0, p.bits, p.page.stages.front());
}

void html_stream::add_cells(const array& piece, std::size_t begin, std::size_t n) {
    impl& p = *p_;
    if (!p.open || n > p.cells_left || begin + n > piece.size())
        throw shape_error(stage_name(stage::weights), "pieces do not fit the layer " +
                                         expected_got(std::to_string(p.open ? p.cells_left : 0) + " cells more at most", std::to_string(n)));
    // The masked cells of lone weights (masked_cells): their exact zeros.
    p.chunk->add(piece, begin, n, nullptr, true);
    p.cells_left -= n;
    if (!p.out) check_written(p.out);  // a full disk stops the page at once, not at the layer's end
}

void html_stream::end_layer(const document& stats) {
    impl& p = *p_;
    if (!p.open || p.cells_left != 0)
        throw shape_error(stage_name(stage::weights), "streamed in part " + expected_got("the layer's every cell", std::to_string(p.cells_left) + " cells fewer"));
    p.chunk->finish();
    p.chunk.reset();
    p.open = false;
    end_layer_rows(stats);
}

void html_stream::finish(const document& run) {
    impl& p = *p_;
    if (p.appended != p.count || p.appended == 0 || p.open)
        throw shape_error(p.plan.empty() ? std::string("html") : p.plan.front().first,
                          "streamed in part " + expected_got(std::to_string(p.count) + " layers", std::to_string(p.appended)));
    // A rollout of one layer is not shown unless asked for (add_rollout makes none).
    if (p.count >= 2 || p.keep_single_rollout) write_rollout_chunk(p.out, run, 0, p.bits, p.page);
    nlohmann::ordered_json rows;
    if (p.head_stats) rows["rows"] = std::move(p.head_rows);
    write_page_tail(p.out, p.source, meta_html(run.meta), false, p.bits, p.page.rollout.has_value(),
                    input_data(run, p.page, p.bits, std::move(rows)));
    check_written(p.out);
}

}  // namespace attn::io
