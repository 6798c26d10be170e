// attn view's page data (page_parts.hpp): the document's Tq×Tk stages quantised layer by
// layer, deflated and base64-encoded into one data block per layer ("chunks"), and the
// records of them the page's JSON block keeps.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "attn/io/writers.hpp"
#include "attn/stages.hpp"
#include "attn/text.hpp"
#include "page_parts.hpp"

namespace attn::io::html_detail {

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
                                 stage_dims* dims) {
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
                                 stage_dims* dims) {
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

/// The Tq×Tk cells of `doc`'s viewed stages (and in `rollout`, of the rollout it shows).
/// Throws value_error(source, "no Tq×Tk stage to view …") when it has none.
std::size_t viewed_cells(const document& doc, const std::string& source, std::size_t& rollout) {
    const auto stages = viewed(doc);
    if (stages.empty()) {
        std::string found;
        for (const auto& t : doc.tensors) found += (found.empty() ? "" : ", ") + t.name;
        throw value_error(source, "no Tq×Tk stage to view (expected " + listed(drawn_stages()) + "; found " +
                                      (found.empty() ? std::string("none") : found) + ")");
    }
    std::size_t cells = 0;
    for (const auto* t : stages) cells += dims_of(doc, *t).cells();
    stage_dims r;
    rollout = shown_rollout(doc, stages, &r) ? r.cells() : 0;  // stored as the stages are
    return cells;
}

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

}  // namespace attn::io::html_detail
