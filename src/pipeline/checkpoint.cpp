// A checkpoint's attention (include/attn/pipeline.hpp compute_checkpoint, docs/design.md §4.3):
// the one place where a safetensors file (io/) meets a model family (model/). Ids →
// embeddings → blocks 0..N−1 → layer N's attention through compute(), with the stages
// x and x_norm added, or listed layers or every layer with a leading layer axis.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include "attn/core/analysis.hpp"
#include "attn/core/heads.hpp"
#include "attn/core/rope_scaling.hpp"
#include "attn/error.hpp"
#include "attn/io/input.hpp"
#include "attn/io/json.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "attn/io/safetensors.hpp"
#include "attn/pipeline/text.hpp"
#include "attn/model/family.hpp"
#include "attn/model/registry.hpp"
#include "attn/pipeline.hpp"
#include "attn/text.hpp"
#include "checkpoint_file.hpp"
#include "inputs.hpp"
#include "meta.hpp"
#include "stage_tensors.hpp"

namespace attn {

namespace {

/// "a conv", "a mamba", "an mlp", "a linear_attention": a layer type as the refusal names it.
std::string with_article(const std::string& type) {
    const bool an = type == "mlp" || (!type.empty() && std::string("aeiou").find(type[0]) != std::string::npos);
    return (an ? "an " : "a ") + type;
}

/// model::weight_source over an opened safetensors checkpoint.
class checkpoint_weights : public model::weight_source {
public:
    explicit checkpoint_weights(io::checkpoint c) : c_(std::move(c)) {}
    const shape_t* shape(const std::string& name) const override {
        const io::tensor_entry* e = c_.find(name);
        return e ? &e->shape : nullptr;
    }
    array load(const std::string& name) const override { return c_.load(name); }
    array load_rows(const std::string& name, const std::vector<std::size_t>& rows) const override { return c_.load_rows(name, rows); }
    std::string stored_dtype(const std::string& name) const override {
        const io::tensor_entry* e = c_.find(name);
        return e ? e->dtype : std::string();
    }
    const io::checkpoint& file() const { return c_; }

private:
    io::checkpoint c_;
};

template <class T>
array array_of(const core::tensor3<T>& t, bool unbatched) {
    shape_t s{t.shape(0), t.shape(1), t.shape(2)};
    if (unbatched) s.erase(s.begin());
    return array::from<T>(std::move(s), t.data());
}

template <class T>
core::tensor3<T> tensor_of(const array& a) {
    const std::size_t B = a.rank() == 3 ? a.shape[0] : 1;
    auto t = core::tensor3<T>::from_shape({B, a.shape[a.rank() - 2], a.shape.back()});
    a.copy_to(t.data());
    return t;
}

/// Stacks one array per layer along a new leading axis (every layer's array has the
/// same name, dtype and shape).
array stack(const std::vector<const array*>& parts) {
    array a;
    a.type = parts.front()->type;
    a.shape = parts.front()->shape;
    a.shape.insert(a.shape.begin(), parts.size());
    const std::size_t n = parts.front()->data.size();
    a.data.resize(n * parts.size());
    for (std::size_t l = 0; l < parts.size(); ++l) std::memcpy(a.data.data() + l * n, parts[l]->data.data(), n);
    return a;
}

/// Joins one array per head, each (B, 1, …) with the same dtype and shape, along the
/// head axis: (B, H, …), or (H, …) for an input without a batch axis.
array heads_joined(const std::vector<array>& heads, bool unbatched) {
    array a;
    a.type = heads.front().type;
    a.shape = heads.front().shape;
    const std::size_t B = a.shape[0], H = heads.size();
    a.shape[1] = H;
    const std::size_t block = heads.front().data.size() / B;  // bytes of one item's head
    a.data.resize(block * B * H);
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t h = 0; h < H; ++h) std::memcpy(a.data.data() + (b * H + h) * block, heads[h].data.data() + b * block, block);
    if (unbatched) a.shape.erase(a.shape.begin());
    return a;
}

bool has(const std::vector<std::string>& list, const char* name) {
    return std::find(list.begin(), list.end(), name) != list.end();
}

/// The options of one layer's compute(): the run's, with the family's attention settings
/// (include/attn/model/family.hpp layer_attention: projections' layout, heads, causal,
/// sliding window, chunks, RoPE, score scale, softcap; sinks join the layer's inputs) wherever the run's options leave them unset; the
/// one place a family's settings reach a run.
pipeline_options layer_options(const pipeline_options& o, const model::layer_attention& la) {
    pipeline_options lo = o;
    lo.ids.clear();
    lo.layout = la.layout;
    if (!o.heads) lo.heads = la.heads;
    if (!o.kv_heads) lo.kv_heads = la.kv_heads;
    lo.attention.mask.causal = o.attention.mask.causal || la.causal;
    if (o.attention.mask.window_left < 0 && o.attention.mask.window_right < 0) lo.attention.mask.window_left = la.window_left;
    if (la.chunk && !o.attention.mask.chunk_size) lo.attention.mask.chunk_size = la.chunk;
    if (la.rope && !o.attention.rope) lo.attention.rope = core::rope_style::half;
    if (la.rope && !o.attention.rope_theta_given) lo.attention.rope_theta = la.rope_theta;
    if (la.rope && !o.attention.rotary_dim) lo.attention.rotary_dim = la.rotary_dim;
    if (la.scale && !o.attention.scale) lo.attention.scale = la.scale;
    if (la.softcap > 0 && !(o.attention.softcap > 0)) lo.attention.softcap = la.softcap;
    if (la.q_temperature.beta != 0 && o.q_temperature.beta == 0) lo.q_temperature = la.q_temperature;
    return lo;
}

/// The family's scaled RoPE as compute() takes it (docs/design.md §4.1): rope_cos and
/// rope_sin (M, R/2) tables in double, indexed by position, for positions 0..M−1 where M
/// is the pass's length (max(position_ids) + 1, else T), which dynamic and longrope
/// read as transformers' seq_len. Theta and R are the layer's (the run's when given).
/// Empty when the layer has no RoPE scaling or the run brings its own tables.
std::vector<named_array> scaled_rope_tables(const model::layer_attention& la, const pipeline_options& lo,
                                            const std::vector<named_array>& passed, std::size_t T) {
    if (!la.rope || la.rope_scaling.kind == core::rope_scaling_kind::none) return {};
    std::size_t M = T;
    for (const auto& p : passed) {
        if (p.name == "rope_cos" || p.name == "rope_sin") return {};
        if (p.name == "position_ids" && is_integer(p.value.type)) {
            std::int64_t top = -1;
            for (std::int64_t v : p.value.to_vector<std::int64_t>()) top = std::max(top, v);
            M = static_cast<std::size_t>(top + 1);
        }
    }
    core::rope_scaling s = la.rope_scaling;
    s.theta = lo.attention.rope_theta;
    if (lo.attention.rotary_dim) s.rotary_dim = lo.attention.rotary_dim;
    std::vector<std::int64_t> positions(M);
    for (std::size_t m = 0; m < M; ++m) positions[m] = static_cast<std::int64_t>(m);
    const core::rope_tables t = core::rope_scaled_tables(s, positions, 1, M);
    const shape_t shape{M, t.half};
    return {{"rope_cos", array::from<double>(shape, t.cos.data())}, {"rope_sin", array::from<double>(shape, t.sin.data())}};
}

/// The layers a run dumps, ascending: --layer N, a list (docs/design.md §5.4), or all,
/// which are a hybrid's softmax-attention layers (§6.1).
std::vector<std::size_t> dumped_layers(const checkpoint_options& ck, const model::config& cfg) {
    if (ck.layer) return {*ck.layer};
    if (!ck.layers.empty()) return ck.layers;
    return model::attention_layers(cfg);
}

/// An ascending list of layers as --layer takes it, runs as ranges: "0,5,10-12".
std::string layer_list_text(const std::vector<std::size_t>& layers) {
    std::string s;
    for (std::size_t i = 0; i < layers.size();) {
        std::size_t j = i;
        while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
        s += (s.empty() ? "" : ",") + std::to_string(layers[i]) + (j > i ? "-" + std::to_string(layers[j]) : "");
        i = j + 1;
    }
    return s;
}

struct run_inputs {
    const array* ids = nullptr;
    const array* x = nullptr;
    std::vector<named_array> passed;  // attention_mask, token_ids, position_ids, … given to every layer
    const encoded_texts* text = nullptr;  // the texts the ids come from (word_weights needs their words)
    nlohmann::ordered_json model_extra = nlohmann::ordered_json::object();  // meta.model's tokens and text, every layer's
};

template <class T>
io::document run(const model::family& fam, const checkpoint_options& ck, const run_inputs& in,
                 const std::vector<std::string>& tokens, const pipeline_options& o) {
    const model::config& cfg = fam.settings();
    // --x with token ids (a family whose blocks read them, family_spec::ids_beside_x): X is
    // the stream, the ids feed only what the blocks read of them.
    const bool unbatched = in.x ? in.x->rank() == 2 : in.ids->rank() == 1;
    core::tensor3<T> x = in.x ? tensor_of<T>(*in.x) : fam.embed<T>(*in.ids);
    if (in.x && x.shape(2) != cfg.hidden)
        throw shape_error("x", "does not fit the model's hidden size " +
                                   expected_got("(…, " + std::to_string(cfg.hidden) + ")", shape_string(in.x->shape)));
    const std::vector<std::size_t> wanted = dumped_layers(ck, cfg);
    const std::size_t first_dumped = wanted.front();
    const std::size_t last = wanted.back();
    const std::size_t start = in.x ? first_dumped : 0;  // X enters the first listed layer directly

    // The stages compute() makes; x and x_norm are the model's own.
    std::vector<std::string> dump;
    for (const auto& s : o.dump)
        if (s != stage_name(stage::x) && s != stage_name(stage::x_norm) && s != stage_name(stage::rollout) &&
            s != stage_name(stage::word_weights))
            dump.push_back(s);
    const bool want_output = has(o.dump, stage_name(stage::output).c_str());
    // Rollout (docs/design.md §4.4) multiplies every layer's head-averaged weights.
    const bool rollout = has(o.dump, stage_name(stage::rollout).c_str());
    if (rollout && ck.layer)
        throw usage_error("--dump", "rollout needs several layers " + expected_got("--layer all", "--layer " + std::to_string(*ck.layer)));
    // Rollout is a product over every block from the first; a list skips some.
    if (rollout && !ck.layers.empty())
        throw usage_error("--dump", "rollout multiplies every layer's weights from layer 0 " +
                                        expected_got("--layer all", "--layer " + layer_list_text(ck.layers)));
    if (rollout && o.average_heads)
        throw usage_error("--dump", "rollout averages the heads itself " + expected_got("no --average-heads", "--average-heads"));
    // Word-level attention (docs/design.md §5.3) merges each layer's weights into the texts' words.
    const bool words = has(o.dump, stage_name(stage::word_weights).c_str());
    if (words && !in.text)
        throw usage_error("--words", "merges tokens into the words of a text " +
                                         expected_got("--text or --text-file", in.x ? "--x" : "token ids"));
    // Both are made layer by layer from that layer's weights, which are then dropped unless
    // --dump keeps them (docs/design.md §5.4): a run holds R and the words, not L layers.
    const bool merged = rollout || words;
    // Weights that are merged and not dumped are handed over one head at a time
    // (pipeline_options::each_head_weights): a layer holds one head's, not Hq heads'.
    const bool by_head = merged && pipeline::weights_by_head_allowed(dump, o.average_heads);
    if (merged && !by_head && !has(dump, stage_name(stage::weights).c_str())) dump.push_back(stage_name(stage::weights));
    const bool streamed = ck.each_layer && !ck.layer;
    std::optional<core::rollout_product> product;
    // One row of words labels a document when every text has the same words.
    const std::vector<std::string>* word_labels = nullptr;
    if (words && std::all_of(in.text->words.begin(), in.text->words.end(), [&](const auto& w) { return w == in.text->words.front(); }))
        word_labels = &in.text->words.front();
    // The Tq×Tk stages --dump asks for are held for every dumped layer, then stacked, unless
    // streamed; the weights rollout and word_weights read are dropped with their layer.
    const bool holds_matrices = std::any_of(o.dump.begin(), o.dump.end(), [](const std::string& s) {
        const stage_kind k = tensor_kind(s);
        return k == stage_kind::logits || k == stage_kind::scores || k == stage_kind::weights || k == stage_kind::mask;
    });
    nlohmann::ordered_json streamed_shapes;  // the stacked shapes, from the first layer streamed

    std::vector<io::document> docs;
    // The "carry:" arrays a family's attention_inputs hands on to later layers (registry.hpp).
    std::vector<named_array> carried;
    for (std::size_t l = start; l <= last; ++l) {
        // A layer without softmax attention (a hybrid's convolution, Mamba, linear attention)
        // carries the stream on and has no stages; it is never the last (docs/design.md §6.1).
        if (!model::attention_layer(cfg, l)) {
            x = fam.other_block<T>(l, x, in.passed);
            continue;
        }
        const bool dumped = std::binary_search(wanted.begin(), wanted.end(), l);
        const bool propagate = l < last;
        core::tensor3<T> xn = fam.attention_norm<T>(l, x);
        model::layer_attention la = fam.attention(l);
        pipeline_options lo = layer_options(o, la);
        std::vector<named_array> inputs;
        std::vector<named_array> projected;  // q_proj, k_proj before the q/k norm
        const auto make_inputs = fam.spec().functions<T>().attention_inputs;
        if (make_inputs) {
            // The family makes q, k (RoPE applied) and v itself (Multi-head Latent Attention).
            const bool kept = has(o.dump, stage_name(stage::q_proj).c_str()) || has(o.dump, stage_name(stage::k_proj).c_str());
            std::vector<named_array> passed = in.passed;
            passed.insert(passed.end(), carried.begin(), carried.end());
            inputs = make_inputs(fam, l, xn, unbatched, passed, kept ? &projected : nullptr);
            for (auto it = inputs.begin(); it != inputs.end();) {
                if (it->name.rfind("carry:", 0) != 0) {
                    ++it;
                    continue;
                }
                carried.erase(std::remove_if(carried.begin(), carried.end(), [&](const named_array& c) { return c.name == it->name; }),
                              carried.end());
                carried.push_back(std::move(*it));
                it = inputs.erase(it);
            }
        } else if (la.q_norm || la.k_norm || la.query_gate) {
            // A q/k norm before RoPE (Qwen3, OLMo 2), or a gated query projection (Qwen3-Next):
            // the family projects and normalises q and k, compute() rotates them.
            const bool kept = has(o.dump, stage_name(stage::q_proj).c_str()) || has(o.dump, stage_name(stage::k_proj).c_str());
            inputs = model::project_attention_inputs(la, xn, unbatched, kept ? &projected : nullptr);
        } else {
            inputs = std::move(la.weights);
            inputs.push_back({"x", array_of(xn, unbatched)});
        }
        for (const auto& p : in.passed) inputs.push_back(p);
        if (!la.sinks.empty() && std::none_of(in.passed.begin(), in.passed.end(), [](const named_array& p) { return p.name == "sinks"; }))
            inputs.push_back({"sinks", array::from<double>(shape_t{la.sinks.size()}, la.sinks.data())});
        for (auto& t : scaled_rope_tables(la, lo, in.passed, x.shape(1))) inputs.push_back(std::move(t));

        // Every block runs with the run's stages, dumped or not: which stages the kernel
        // keeps picks its path (materialised or streamed rows, float32's base-2 softmax),
        // and the stream entering a layer must not depend on which layers are listed, so
        // --layer N and any list are bitwise slices of --layer all (docs/design.md §5.4).
        lo.dump = dump;
        // compute() sees q and k after the family's RoPE: q_proj and k_proj are the family's.
        if (make_inputs)
            lo.dump.erase(std::remove_if(lo.dump.begin(), lo.dump.end(), [](const std::string& s) {
                              return s == stage_name(stage::q_proj) || s == stage_name(stage::k_proj);
                          }), lo.dump.end());
        lo.planned_layers = streamed || !holds_matrices ? 1 : wanted.size();
        if (propagate && !has(lo.dump, stage_name(stage::output).c_str())) lo.dump.push_back(stage_name(stage::output));
        if (lo.dump.empty()) lo.dump.push_back(stage_name(stage::output));
        // A NoPE layer rotates nothing: compute() keeps its q and k, which are its q_proj and k_proj.
        if (la.nope) {
            std::vector<std::string> d;
            for (const auto& s : lo.dump) {
                const std::string t = s == stage_name(stage::q_proj) ? stage_name(stage::q)
                                      : s == stage_name(stage::k_proj) ? stage_name(stage::k) : s;
                if (!has(d, t.c_str())) d.push_back(t);
            }
            lo.dump = std::move(d);
        }
        std::vector<array> head_words;  // by_head: each head's word_weights, (B, 1, W, W)
        // Layers not dumped compute their weights too, and drop them: the kernel's path is
        // the dumped layers' (see above).
        if (by_head)
            lo.each_head_weights = [&, dumped](std::size_t h, std::size_t heads, const array& w) {
                // w is head h's (B, 1, T, T).
                if (!dumped) return;
                if (rollout) {
                    if (!product) product.emplace(w.shape[0], heads, w.shape[2], w.shape[3]);
                    product->add_head(h, reinterpret_cast<const T*>(w.data.data()));
                }
                if (words) head_words.push_back(word_weights_of(w, false, true, *in.text));
            };
        io::document doc = compute(std::move(inputs), tokens, lo);
        // compute() saw q and k already normalised, so its q_proj and k_proj are after the
        // norm; the stages are the projections before it (docs/design.md §5.2).
        for (auto& t : doc.tensors)
            for (auto& p : projected)
                if (t.name == p.name) t.value = std::move(p.value);
        if (make_inputs)
            for (auto& p : projected)
                if (has(o.dump, p.name.c_str())) {
                    p.axes = fit_axes(p.name, p.value.rank(), false);
                    doc.tensors.push_back(std::move(p));
                }

        if (la.nope)
            for (const auto& [proj, same] : {std::pair{stage::q_proj, stage::q}, std::pair{stage::k_proj, stage::k}})
                if (has(o.dump, stage_name(proj).c_str()))
                    for (std::size_t i = 0, n = doc.tensors.size(); i < n; ++i)
                        if (doc.tensors[i].name == stage_name(same)) doc.tensors.push_back({stage_name(proj), doc.tensors[i].value});

        if (dumped && by_head && words)
            doc.tensors.push_back({stage_name(stage::word_weights), heads_joined(head_words, unbatched)});
        if (dumped && merged && !by_head) {
            // Rollout and word_weights take this layer's weights now, and the weights go unless
            // --dump keeps them, before the block's MLP allocates its own (docs/design.md §5.4).
            auto w = std::find_if(doc.tensors.begin(), doc.tensors.end(), [](const named_array& a) { return a.name == stage_name(stage::weights); });
            if (rollout) {
                // weights (H, T, T) or (B, H, T, T) multiplied into R (T, T) or (B, T, T).
                const array& a = w->value;
                if (!product) product.emplace(unbatched ? 1 : a.shape[0], a.shape[a.rank() - 3], a.shape[a.rank() - 2], a.shape.back());
                product->multiply(a.data.empty() ? nullptr : reinterpret_cast<const T*>(a.data.data()));
            }
            array merged_words = words ? word_weights_of(w->value, false, !unbatched, *in.text) : array{};
            if (!has(o.dump, stage_name(stage::weights).c_str())) doc.tensors.erase(w);
            if (words) doc.tensors.push_back({stage_name(stage::word_weights), std::move(merged_words)});
        }

        core::tensor3<T> next;
        if (propagate) {
            auto it = std::find_if(doc.tensors.begin(), doc.tensors.end(), [](const named_array& a) { return a.name == stage_name(stage::output); });
            next = fam.finish_block<T>(l, x, tensor_of<T>(it->value), in.passed);
            if (!want_output) doc.tensors.erase(it);
        }
        if (dumped) {
            // x and x_norm first, as in pipeline order; then compute's stages in --dump order
            // (weights only when asked for: those rollout and word_weights read are gone by now).
            std::vector<named_array> ordered;
            for (const auto& s : o.dump) {
                if (s == stage_name(stage::x)) ordered.push_back({stage_name(stage::x), array_of(x, unbatched)});
                else if (s == stage_name(stage::x_norm)) ordered.push_back({stage_name(stage::x_norm), array_of(xn, unbatched)});
                else
                    for (auto& t : doc.tensors)
                        if (t.name == s || t.name.rfind(s + ".", 0) == 0) ordered.push_back(std::move(t));
            }
            doc.tensors = std::move(ordered);
            if (streamed) {
                // Handed on and freed: the document kept is the last layer's meta alone.
                if (docs.empty()) {
                    streamed_shapes = nlohmann::ordered_json::object();
                    for (const auto& t : doc.tensors) {
                        shape_t sh = t.value.shape;
                        sh.insert(sh.begin(), wanted.size());
                        streamed_shapes[t.name] = sh;
                    }
                }
                const auto index = static_cast<std::size_t>(std::lower_bound(wanted.begin(), wanted.end(), l) - wanted.begin());
                // Its meta as --layer l gives it (model.layer, shapes without the layer
                // axis): a JSON Lines line per layer is that run's output (docs/design.md §5.4).
                checkpoint_options one = ck;
                one.layer = l;
                one.layers.clear();
                doc.meta["model"] = pipeline::model_meta(cfg, one);
                for (const auto& [key, value] : in.model_extra.items()) doc.meta["model"][key] = value;
                pipeline::record_shapes(doc);
                if (word_labels) doc.words = *word_labels;
                ck.each_layer(doc, index, wanted.size());
                doc.tensors.clear();
                docs.clear();
            }
            docs.push_back(std::move(doc));
        }
        if (propagate) x = std::move(next);
    }

    io::document out = std::move(docs.back());
    if (!ck.layer && !streamed) {
        std::vector<named_array> stacked;
        for (std::size_t i = 0; i < out.tensors.size(); ++i) {
            std::vector<const array*> parts;
            for (std::size_t l = 0; l + 1 < docs.size(); ++l) parts.push_back(&docs[l].tensors[i].value);
            parts.push_back(&out.tensors[i].value);
            // Layers of other head dims or KV heads (Gemma 4's layer types) give q, k, v of
            // other shapes, which one array cannot hold.
            for (std::size_t l = 0; l < parts.size(); ++l)
                if (parts[l]->shape != parts.front()->shape || parts[l]->type != parts.front()->type)
                    throw shape_error(out.tensors[i].name, "has another shape on layer " + std::to_string(wanted[l]) +
                                                               " than on layer " + std::to_string(wanted.front()) + ", which one array cannot stack " +
                                                               expected_got(shape_string(parts.front()->shape) + " on every layer dumped",
                                                                            shape_string(parts[l]->shape)));
            // The layer axis first, before the axes the layer's tensor carries (if it does).
            std::vector<std::string> axes = out.tensors[i].axes;
            if (axes.size() == out.tensors[i].value.rank()) axes.insert(axes.begin(), "L");
            else axes.clear();
            stacked.push_back({out.tensors[i].name, stack(parts), std::move(axes)});
        }
        out.tensors = std::move(stacked);
    }
    if (rollout) {
        // R, (T, T) or (B, T, T) in double, where --dump asked for it among the stacked stages.
        const std::vector<double> r = product->result();
        shape_t shape{product->batch(), product->size(), product->size()};
        if (unbatched) shape.erase(shape.begin());
        named_array made{stage_name(stage::rollout), array::from<double>(shape, r.data())};
        made.axes = fit_axes(made.name, shape.size(), false);  // (B, Tq, Tk) or (Tq, Tk): no layer axis
        std::vector<named_array> ordered;
        for (const auto& s : o.dump) {
            if (s == made.name) ordered.push_back(std::move(made));
            for (auto& t : out.tensors)
                if (t.name == s || t.name.rfind(s + ".", 0) == 0) ordered.push_back(std::move(t));
        }
        out.tensors = std::move(ordered);
    }
    if (word_labels) out.words = *word_labels;
    out.meta["model"] = pipeline::model_meta(cfg, ck);
    pipeline::record_shapes(out);
    if (streamed) out.meta["shapes"] = streamed_shapes;
    return out;
}

/// The tokenizer.json of a run: --tokenizer (or its alias --vocab), else the one beside
/// the checkpoint.
std::string tokenizer_path(const checkpoint_options& ck) {
    if (!ck.tokenizer.empty()) return ck.tokenizer;
    if (!ck.vocab.empty()) return ck.vocab;
    const std::filesystem::path p(ck.path);
    return (p.has_parent_path() ? p.parent_path() / "tokenizer.json" : std::filesystem::path("tokenizer.json")).string();
}

std::string config_path(const checkpoint_options& ck) {
    if (!ck.config.empty()) return ck.config;
    const std::filesystem::path p(ck.path);
    return (p.has_parent_path() ? p.parent_path() / "config.json" : std::filesystem::path("config.json")).string();
}

}  // namespace

io::document compute_checkpoint(const checkpoint_options& ck, std::vector<named_array> inputs,
                                const std::vector<std::string>& bundle_tokens, const pipeline_options& options) {
    pipeline::add_inline_ids(inputs, options);
    // Texts in (docs/design.md §5.3): the tokenizer gives the ids, the padding mask and
    // the labels.
    std::optional<tokenizer::tokenizer> tok;
    const std::string tok_path = tokenizer_path(ck);
    if (!ck.tokenizer.empty() && !ck.vocab.empty())
        throw usage_error("--vocab", "is --tokenizer's alias " + expected_got("one of them", "both"));
    const bool named = !ck.tokenizer.empty() || !ck.vocab.empty();
    if (named || !ck.texts.empty()) {
        if (named || std::filesystem::exists(tok_path)) {
            tok = load_tokenizer(tok_path);
        } else {
            throw io_error(ck.path, "no tokenizer.json beside the checkpoint to encode the text (expected " + tok_path +
                                        ", or give --tokenizer FILE)");
        }
    }
    std::optional<encoded_texts> text;
    if (!ck.texts.empty()) {
        for (const auto& a : inputs)
            if (a.name == "token_ids" || a.name == "x" || a.name == "attention_mask")
                throw usage_error("text", "gives the " + std::string(a.name == "x" ? "input" : a.name) + " itself " +
                                              expected_got("text, or " + a.name + ", not both", "both"));
        text = encode_texts(*tok, ck.texts, ck.add_special_tokens);
        inputs.push_back({"token_ids", text->token_ids});
        if (text->attention_mask) inputs.push_back({"attention_mask", *text->attention_mask});
    }
    run_inputs in;
    for (auto& a : inputs) {
        if (a.name == "token_ids") in.ids = &a.value;
        else if (a.name == "x") in.x = &a.value;
    }
    if (!in.ids && !in.x)
        throw usage_error("attn compute", "a checkpoint needs its input " +
                                              expected_got("--ids, --token-ids FILE or --x FILE", "none"));
    for (const auto& a : inputs) {
        if (a.name == "x" || a.name == "token_ids") continue;
        const auto& kinds = io::input_kinds();
        if (std::none_of(kinds.begin(), kinds.end(),
                         [&](const io::input_kind& k) { return k.with_checkpoint && k.name == a.name; }))
            throw usage_error(a.name, "does not apply to a checkpoint, whose weights come from it " +
                                          expected_got("ids or x, masks and position_ids", a.name));
        in.passed.push_back(a);
    }
    if (in.ids) {
        if (!is_integer(in.ids->type))
            throw value_error("token_ids", "not integers " + expected_got("an integer dtype", std::string(dtype_name(in.ids->type))));
        if (in.ids->rank() != 1 && in.ids->rank() != 2)
            throw shape_error("token_ids", "wrong rank " + expected_got("(T,) or (B, T)", shape_string(in.ids->shape)));
        if (in.ids->size() == 0) throw shape_error("token_ids", "no tokens " + expected_got("T ≥ 1", shape_string(in.ids->shape)));
        in.passed.push_back({"token_ids", *in.ids});  // for --pad-id
    }
    if (in.x && in.x->rank() != 2 && in.x->rank() != 3) {
        throw shape_error("x", "wrong rank " + expected_got("(T, hidden) or (B, T, hidden)", shape_string(in.x->shape)));
    }
    if (!ck.layer && ck.layers.empty() && in.x)
        throw usage_error("--layer", "all runs every block from token ids " +
                                         expected_got("--ids or --token-ids with --layer all, or --layer N with --x", "--x"));

    pipeline::check_checkpoint_format(ck.path);
    checkpoint_weights weights(io::checkpoint::open(ck.path));
    const std::string cfg_path = config_path(ck);
    model::config cfg;
    if (ck.config.empty() && !std::filesystem::exists(cfg_path)) {
        // No config.json: --arch and --heads stand in for it, the sizes come from the tensors.
        if (!ck.arch)
            throw io_error(ck.path, "no config.json beside the checkpoint (expected " + cfg_path +
                                        ", or give --config FILE, or --arch and --heads)");
        pipeline::refuse_quantised_tensors(weights.file());
        cfg = model::config_from_tensors(*ck.arch, weights, options.heads, options.kv_heads, ck.path);
    } else {
        // A quantization_config is refused first, by its quant_method (model::parse_config).
        cfg = model::parse_config(io::read_side_json(cfg_path, io::side_json::config), cfg_path, ck.arch);
        pipeline::refuse_quantised_tensors(weights.file());
    }
    const model::family fam(cfg, weights, ck.path);
    if (fam.spec().stream_not_x) {
        // A stream that is not one x (Gemma 3n's AltUp streams): no X in, no x stage out.
        const std::string why = fam.spec().stream_not_x(cfg);
        if (in.x) throw usage_error("--x", why + " " + expected_got("token ids or --text", "--x"));
        if (has(options.dump, stage_name(stage::x).c_str()))
            throw usage_error("--dump", "x: " + why + " " + expected_got("stages other than x", "x"));
    }
    if (in.ids && in.x) {
        // Token ids beside X only for a family whose blocks read them (Gemma 4's per-layer inputs).
        if (!fam.spec().ids_beside_x || !fam.spec().ids_beside_x(cfg))
            throw usage_error("--x", "X given twice " + expected_got("token ids or --x, not both", "both"));
        shape_t tokens_of_x(in.x->shape.begin(), in.x->shape.end() - 1);
        if (in.ids->shape != tokens_of_x)
            throw shape_error("token_ids", "do not fit --x's tokens " + expected_got(shape_string(tokens_of_x), shape_string(in.ids->shape)));
    }
    // A hybrid's layers without softmax attention have no stages (docs/design.md §6.1).
    const std::vector<std::size_t> attention = model::attention_layers(cfg);
    if (attention.empty())
        throw value_error(ck.path, "no layer has softmax attention, so none has stages " +
                                       expected_got("an attention layer among the " + std::to_string(cfg.layers), "none"));
    // The last layer --layer N or a list asks for (all layers end at the model's last).
    const std::vector<std::size_t> asked = dumped_layers(ck, cfg);
    if (const std::size_t last = asked.back(); last >= cfg.layers)
        throw usage_error("--layer", "beyond the model's layers " +
                                         expected_got("0 to " + std::to_string(cfg.layers - 1) + " or all", std::to_string(last)));
    for (const std::size_t l : asked)
        if (!model::attention_layer(cfg, l))
            throw usage_error("--layer", "layer " + std::to_string(l) + " is " + with_article(cfg.mixer_types[l]) +
                                             " layer, without softmax attention " +
                                             expected_got("one of the attention layers " + layer_list_text(attention) + ", or all",
                                                          std::to_string(l)));

    std::vector<std::string> tokens = options.tokens.empty() ? bundle_tokens : options.tokens;
    std::vector<std::vector<std::string>> item_tokens;  // (B, T) labels of a batch of ids
    if (tokens.empty() && in.ids && tok) {
        // Labelled by the tokenizer's decoder, token by token (HF decode([id])).
        const std::size_t T = in.ids->shape.back(), B = in.ids->size() / T;
        const std::vector<std::int64_t> ids = in.ids->to_vector<std::int64_t>();
        for (std::size_t b = 0; b < B; ++b) {
            if (text) {
                item_tokens.push_back(text->labels[b]);
            } else {
                item_tokens.push_back(token_labels(*tok, std::vector<std::int64_t>(ids.begin() + static_cast<std::ptrdiff_t>(b * T),
                                                                                    ids.begin() + static_cast<std::ptrdiff_t>((b + 1) * T))));
            }
        }
        if (std::all_of(item_tokens.begin(), item_tokens.end(), [&](const auto& l) { return l == item_tokens.front(); }))
            tokens = item_tokens.front();
        if (in.ids->rank() == 1) item_tokens.clear();
    } else if (tokens.empty() && in.ids) {
        // Without a tokenizer the tokens are labelled by their ids; each batch item its own.
        const std::size_t T = in.ids->shape.back(), B = in.ids->size() / T;
        for (std::size_t b = 0; b < B; ++b) {
            std::vector<std::string> labels;
            for (std::size_t i = 0; i < T; ++i) {
                // A negative or huge id (refused by the embedding next) has no size_t: not cast.
                const double v = in.ids->value(b * T + i);
                const bool whole = v >= 0 && v < 9007199254740992.0;  // 2^53: exact in a double
                const auto id = whole ? static_cast<std::size_t>(v) : std::size_t{0};
                labels.push_back(whole ? std::to_string(id) : general_number(v));
            }
            item_tokens.push_back(std::move(labels));
        }
        // One sequence, or items that read the same, label the rows directly; items that
        // differ keep theirs in meta.model.tokens (B lists of T labels).
        if (std::all_of(item_tokens.begin(), item_tokens.end(), [&](const auto& l) { return l == item_tokens.front(); }))
            tokens = item_tokens.front();
        if (in.ids->rank() == 1) item_tokens.clear();
    } else if (named && tokens.empty() && !in.ids) {
        throw usage_error(ck.vocab.empty() ? "--tokenizer" : "--vocab", "labels token ids " + expected_got("--ids or --token-ids", "--x"));
    }
    // The compute dtype: float64 only for an F64 checkpoint (docs/design.md §1: F16, BF16, F8 in float32).
    const std::string probe = fam.name(fam.spec().dtype_probe);
    const io::tensor_entry* e = weights.file().find(probe);
    const dtype t = options.compute_type ? *options.compute_type : e && e->dtype == "F64" ? dtype::f8 : dtype::f4;
    // --words asks for the stage word_weights (docs/design.md §5.3); run() merges it.
    pipeline_options run_options = options;
    const std::string& word_stage = stage_name(stage::word_weights);
    if (ck.words && !has(run_options.dump, word_stage.c_str())) run_options.dump.push_back(word_stage);
    const bool words = has(run_options.dump, word_stage.c_str());
    in.text = text ? &*text : nullptr;
    if (!item_tokens.empty()) in.model_extra["tokens"] = item_tokens;
    if (text) {
        nlohmann::json t;
        t["tokenizer"] = tok_path;
        t["texts"] = ck.texts;  // as given (--text, --text-file): attn view shows them
        t["add_special_tokens"] = ck.add_special_tokens;
        t["lengths"] = text->lengths;
        t["pad_id"] = 0;
        // Per text, its token ids before padding (transformers' input_ids).
        const std::vector<std::int64_t> all_ids = text->token_ids.to_vector<std::int64_t>();
        const std::size_t T = text->token_ids.shape.back();
        nlohmann::json ids = nlohmann::json::array();
        for (std::size_t b = 0; b < text->lengths.size(); ++b)
            ids.push_back(std::vector<std::int64_t>(all_ids.begin() + static_cast<std::ptrdiff_t>(b * T),
                                                    all_ids.begin() + static_cast<std::ptrdiff_t>(b * T + text->lengths[b])));
        t["ids"] = ids;
        if (words) t["words"] = text->words;  // per text: word_weights' rows and columns
        in.model_extra["text"] = t;
    }
    io::document doc = t == dtype::f8 ? run<double>(fam, ck, in, tokens, run_options) : run<float>(fam, ck, in, tokens, run_options);
    for (const auto& [key, value] : in.model_extra.items()) doc.meta["model"][key] = value;
    return doc;
}

}  // namespace attn
