// Head statistics and rollout of a document's weights (attn/pipeline/analysis.hpp).
#include "attn/pipeline/analysis.hpp"

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "attn/core/analysis.hpp"
#include "attn/error.hpp"
#include "attn/io/writers.hpp"
#include "attn/stages.hpp"

namespace attn {

namespace {

/// core::rollout of (L, B, H, T, T) weights in C order; float32 weights (what attn
/// computes) are read in place, any other dtype through a float64 copy.
std::vector<double> rollout_values(const array& a, std::size_t L, std::size_t B, std::size_t H, std::size_t T) {
    return a.type == dtype::f4 && !a.data.empty()
               ? core::rollout(reinterpret_cast<const float*>(a.data.data()), L, B, H, T, T)
               : core::rollout(a.to_vector<double>().data(), L, B, H, T, T);
}

}  // namespace

void add_head_stats(io::document& doc) {
    const named_array* w = nullptr;
    for (const auto& t : doc.tensors) {
        if (tensor_kind(t.name) == stage_kind::per_head) return;
        if (tensor_kind(t.name) == stage_kind::weights) w = &t;
    }
    if (!w || w->value.rank() < 2) return;
    const array& a = w->value;
    const std::size_t tq = a.shape[a.rank() - 2], tk = a.shape.back();
    if (tq == 0 || tk == 0) return;
    const std::size_t blocks = a.size() / (tq * tk);
    const std::vector<char> masked = io::masked_cells(doc, *w);
    std::vector<unsigned char> visible(masked.size());
    for (std::size_t i = 0; i < masked.size(); ++i) visible[i] = masked[i] ? 0 : 1;
    const std::vector<double> values = a.to_vector<double>();
    const core::head_statistics s = core::head_stats(values.data(), visible.data(), blocks, tq, tk, 1);
    shape_t shape(a.shape.begin(), a.shape.end() - 2);
    if (shape.empty()) shape.push_back(1);  // a lone (Tq, Tk): one block
    const std::pair<const char*, const std::vector<double>*> parts[] = {{"entropy", &s.entropy},
                                                                          {"max_weight", &s.max_weight},
                                                                          {"distance", &s.distance},
                                                                          {"sink_mass", &s.sink_mass},
                                                                          {"small_share", &s.small_share}};
    for (const auto& [name, v] : parts) doc.tensors.push_back({stage_name(stage::head_stats) + "." + name, array::from<double>(shape, v->data())});
}

void add_rollout(io::document& doc) {
    const named_array* w = nullptr;
    for (const auto& t : doc.tensors) {
        if (tensor_kind(t.name) == stage_kind::rollout) return;
        if (tensor_kind(t.name) == stage_kind::weights) w = &t;
    }
    if (!w) return;
    const array& a = w->value;
    const bool layered = a.rank() == 5 || (io::has_layer_axis(io::tensor_axes(doc, *w)) && a.rank() >= 3 && a.rank() <= 5);
    if (!layered) return;
    // Rollout is a product over every block from the first; listed layers skip some.
    if (!io::listed_layers(doc).empty()) return;
    const std::size_t L = a.shape[0], T = a.shape[a.rank() - 2], r = a.rank() - 1;
    if (L < 2 || T == 0 || a.shape.back() != T) return;
    std::size_t B = 1, H = 1;
    bool batched = r == 4;
    if (r == 3) {
        batched = !io::leading_axis_is_heads(doc, *w);
        (batched ? B : H) = a.shape[1];
    }
    if (r == 4) B = a.shape[1], H = a.shape[2];
    if (B == 0 || H == 0) return;
    const std::vector<double> rolled = rollout_values(a, L, B, H, T);
    shape_t shape{B, T, T};
    if (!batched) shape.erase(shape.begin());
    doc.tensors.push_back({stage_name(stage::rollout), array::from<double>(shape, rolled.data())});
}

array rollout_of_weights(const array& w, const std::string& source) {
    const shape_t& s = w.shape;
    const std::string shape = shape_string(s);
    // The array is (L, B, H, Tq, Tk) or (L, H, Tq, Tk); each refusal names the source and shape.
    if (s.size() < 4 || s.size() > 5)
        throw shape_error(source, "rollout needs (L, B, H, T, T) or (L, H, T, T) weights " +
                                      expected_got("rank 4 or 5", shape));
    const std::size_t L = s[0], B = s.size() == 5 ? s[1] : 1, H = s[s.size() - 3], Tq = s[s.size() - 2],
                      Tk = s.back();
    if (Tq != Tk) throw shape_error(source, "rollout needs Tq = Tk " + expected_got("(…, T, T)", shape));
    if (L < 2)
        throw shape_error(source, "rollout needs several layers " + expected_got("L ≥ 2 on the first axis", shape));
    if (H == 0) throw shape_error(source, "rollout needs at least one head " + expected_got("H ≥ 1", shape));
    const std::vector<double> r = rollout_values(w, L, B, H, Tq);
    shape_t out_shape{B, Tq, Tk};
    if (s.size() == 4) out_shape.erase(out_shape.begin());
    return array::from<double>(out_shape, r.data());
}

}  // namespace attn
