// Stages in the input's layout (src/pipeline/stage_tensors.hpp).
#include "stage_tensors.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "attn/core/analysis.hpp"
#include "attn/core/heads.hpp"
#include "attn/core/stats.hpp"
#include "attn/error.hpp"
#include "attn/io/limits.hpp"
#include "attn/pipeline.hpp"

namespace attn::pipeline {

/// Mean over the head axis: (B, H, R, C) → (B, 1, R, C).
template <class T>
tensor4<T> mean_heads(const tensor4<T>& t) {
    const std::size_t B = t.shape(0), H = t.shape(1), R = t.shape(2), C = t.shape(3);
    tensor4<T> out = tensor4<T>::from_shape({B, 1, R, C});
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t i = 0; i < R * C; ++i) {
            T s = 0;
            for (std::size_t h = 0; h < H; ++h) s += t.data()[(b * H + h) * R * C + i];
            out.data()[b * R * C + i] = s / static_cast<T>(H);
        }
    return out;
}

/// Shape of a (B, H, R, C) stage in the input's layout (docs/design.md §2): the head axis is
/// dropped when there is one head and the input had no head axis, and the batch axis
/// when the input had none (rank 2: (H, R, C) as PyTorch's unbatched MHA gives).
shape_t layout_shape(const shape_t& full, std::size_t input_rank) {
    shape_t s = full;
    if (s[1] == 1 && input_rank < 4) s.erase(s.begin() + 1);
    if (input_rank == 2) s.erase(s.begin());
    return s;
}

/// (B, H, T, D) in the input's layout: 4-D as is; rank 3 → (B, T, H·D); rank 2 → (T, H·D).
/// `owner` keeps `t` alive; a 4-D result, or one of a single head, views it; the others are
/// merged copies.
template <class T>
array in_input_layout(const tensor4<T>& t, std::size_t input_rank, std::shared_ptr<const void> owner) {
    if (input_rank == 4) {
        shape_t s{t.shape(0), t.shape(1), t.shape(2), t.shape(3)};
        return owner ? view_of(std::move(s), std::move(owner), t) : array::from<T>(std::move(s), t.data());
    }
    if (t.shape(1) == 1) {
        // One head: (B, 1, T, D) and (B, T, D) are the same bytes, viewed rather than
        // merged into a copy (docs/design.md §5.4).
        shape_t s{t.shape(0), t.shape(2), t.shape(3)};
        if (input_rank == 2) s.erase(s.begin());
        return owner ? view_of(std::move(s), std::move(owner), t) : array::from<T>(std::move(s), t.data());
    }
    tensor3<T> m = merge_heads(t);
    shape_t s{m.shape(0), m.shape(1), m.shape(2)};
    if (input_rank == 2) s.erase(s.begin());
    return adopt(std::move(s), std::move(m));
}

/// A Tq×Tk (or lse) stage in the input's leading axes, viewing `t` (kept by `owner`).
template <class T>
array stage_array(const tensor4<T>& t, std::size_t input_rank, std::shared_ptr<const void> owner) {
    return view_of(layout_shape({t.shape(0), t.shape(1), t.shape(2), t.shape(3)}, input_rank), std::move(owner), t);
}

double planned_stage_bytes(const std::vector<stage>& stages, const attention_options& ao, bool average_heads,
                           std::size_t B, std::size_t H, std::size_t Tq, std::size_t Tk, std::size_t element_bytes,
                           std::size_t layers) {
    const auto wants = [&](stage s) { return std::find(stages.begin(), stages.end(), s) != stages.end(); };
    const double per_head = static_cast<double>(B) * static_cast<double>(Tq) * static_cast<double>(Tk);
    const double cells = per_head * static_cast<double>(H);
    double elements = 0;
    for (const bool kept : {ao.keep_qk, ao.keep_scaled, ao.keep_scores, ao.keep_weights}) elements += kept ? cells : 0;
    if (average_heads)
        for (const stage s : {stage::qk, stage::scaled, stage::scores, stage::weights, stage::stats})
            elements += wants(s) ? per_head : 0;
    double bytes = elements * static_cast<double>(element_bytes);
    if (wants(stage::mask)) bytes += average_heads ? per_head : cells;
    return bytes * static_cast<double>(layers > 1 ? 2 * layers : 1);
}

bool weights_by_head_allowed(const std::vector<std::string>& dump, bool average_heads) {
    return !average_heads && std::none_of(dump.begin(), dump.end(), [](const std::string& s) {
        return s == stage_name(stage::weights) || s == stage_name(stage::qk) || s == stage_name(stage::scaled) ||
               s == stage_name(stage::scores) || s == stage_name(stage::stats);
    });
}

void record_shapes(io::document& doc) {
    nlohmann::ordered_json shapes = nlohmann::ordered_json::object();
    for (const auto& t : doc.tensors) shapes[t.name] = t.value.shape;
    doc.meta["shapes"] = shapes;
}

template <class T>
array combined_mask(const mask<T>& m, std::size_t input_rank, bool average_heads) {
    const std::size_t B = m.B, H = m.H, Tq = m.Tq, Tk = m.Tk, Hout = average_heads ? 1 : H;
    array a;
    a.type = dtype::b1;
    a.shape = layout_shape({B, Hout, Tq, Tk}, average_heads ? std::min<std::size_t>(input_rank, 3) : input_rank);
    a.data.resize(B * Hout * Tq * Tk);
    auto* out = reinterpret_cast<std::uint8_t*>(a.data.data());
    std::vector<std::uint8_t> row(Tk);
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t h = 0; h < H; ++h)
            for (std::size_t i = 0; i < Tq; ++i) {
                m.attend_row(b, h, i, row.data());
                std::uint8_t* dst = out + ((b * Hout + (average_heads ? 0 : h)) * Tq + i) * Tk;
                for (std::size_t j = 0; j < Tk; ++j) dst[j] = static_cast<std::uint8_t>(dst[j] | row[j]);
            }
    return a;
}

/// The `stats` stage as tensors "stats.dk", "stats.var_q", … (stats.hpp): the variances
/// 0-d, the row statistics shaped like lse (the Tq×Tk stage shape without the key
/// axis). With --average-heads the row statistics describe the head-averaged weights
/// (the weights that are dumped); the variances always cover every head.
/// dk and argmax are int64, the rest in the compute dtype.
template <class T>
void append_stats(io::document& doc, const tensor4<T>& q, const tensor4<T>& k, const attention_result<T>& r,
                  std::size_t rank, bool average_heads) {
    const tensor4<T> averaged = average_heads ? mean_heads(r.weights) : tensor4<T>();
    const tensor4<T>& w = average_heads ? averaged : r.weights;
    const std::size_t B = w.shape(0), H = w.shape(1), Tq = w.shape(2), Tk = w.shape(3);
    const attention_stats st = compute_stats<T>(q.shape(3), q.data(), q.size(), k.data(), k.size(), r.qk.data(),
                                                r.scaled.data(), r.qk.size(), w.data(), B * H * Tq, Tk);
    shape_t rows = layout_shape({B, H, Tq, 1}, average_heads ? std::min<std::size_t>(rank, 3) : rank);
    rows.pop_back();
    const auto scalar = [](double v) {
        const T x = static_cast<T>(v);
        return array::from<T>({}, &x);
    };
    const auto per_row = [&](const std::vector<double>& v) {
        const std::vector<T> x(v.begin(), v.end());
        return array::from<T>(rows, x.data());
    };
    doc.tensors.push_back({"stats.dk", int64_array({}, {static_cast<std::int64_t>(st.dk)})});
    doc.tensors.push_back({"stats.var_q", scalar(st.var_q)});
    doc.tensors.push_back({"stats.var_k", scalar(st.var_k)});
    doc.tensors.push_back({"stats.var_qk", scalar(st.var_qk)});
    doc.tensors.push_back({"stats.var_scaled", scalar(st.var_scaled)});
    doc.tensors.push_back({"stats.entropy", per_row(st.rows.entropy)});
    doc.tensors.push_back({"stats.max_weight", per_row(st.rows.max_weight)});
    doc.tensors.push_back({"stats.argmax", int64_array(rows, st.rows.argmax)});
    doc.tensors.push_back({"stats.row_sum", per_row(st.rows.row_sum)});
}

template <class T>
head_stats_table<T>::head_stats_table(const mask<T>& m, std::size_t sink_k)
    : m_(m), sink_k_(sink_k), visible_(m.Tq * m.Tk) {
    for (auto* v : {&all_.entropy, &all_.max_weight, &all_.distance, &all_.sink_mass, &all_.small_share})
        v->assign(m.B * m.H, 0.0);
}

template <class T>
void head_stats_table<T>::add(std::size_t b, std::size_t h, const T* weights) {
    // One head at a time: the visible cells of one head, not of the whole (B, H, Tq, Tk).
    const std::size_t Tq = m_.Tq, Tk = m_.Tk, at = b * m_.H + h;
    for (std::size_t i = 0; i < Tq; ++i) m_.attend_row(b, h, i, visible_.data() + i * Tk);
    const head_statistics one = core::head_stats(weights, visible_.data(), 1, Tq, Tk, sink_k_);
    all_.entropy[at] = one.entropy[0];
    all_.max_weight[at] = one.max_weight[0];
    all_.distance[at] = one.distance[0];
    all_.sink_mass[at] = one.sink_mass[0];
    all_.small_share[at] = one.small_share[0];
}

template <class T>
void head_stats_table<T>::append(io::document& doc, std::size_t rank) const {
    shape_t shape{m_.B, m_.H};
    if (rank == 2) shape.erase(shape.begin());
    const auto tensor = [&](const std::vector<double>& v) {
        const std::vector<T> x(v.begin(), v.end());
        return array::from<T>(shape, x.data());
    };
    doc.tensors.push_back({"head_stats.entropy", tensor(all_.entropy)});
    doc.tensors.push_back({"head_stats.max_weight", tensor(all_.max_weight)});
    doc.tensors.push_back({"head_stats.distance", tensor(all_.distance)});
    doc.tensors.push_back({"head_stats.sink_mass", tensor(all_.sink_mass)});
    doc.tensors.push_back({"head_stats.small_share", tensor(all_.small_share)});
}

template <class T>
void append_head_stats(io::document& doc, const attention_result<T>& r, const mask<T>& m, std::size_t rank,
                       std::size_t sink_k) {
    const tensor4<T>& w = r.weights;
    const std::size_t B = w.shape(0), H = w.shape(1), TT = w.shape(2) * w.shape(3);
    head_stats_table<T> table(m, sink_k);
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t h = 0; h < H; ++h) table.add(b, h, w.data() + (b * H + h) * TT);
    table.append(doc, rank);
}

template class head_stats_table<float>;
template class head_stats_table<double>;
template tensor4<float> mean_heads(const tensor4<float>&);
template tensor4<double> mean_heads(const tensor4<double>&);
template array in_input_layout(const tensor4<float>&, std::size_t, std::shared_ptr<const void>);
template array in_input_layout(const tensor4<double>&, std::size_t, std::shared_ptr<const void>);
template array stage_array(const tensor4<float>&, std::size_t, std::shared_ptr<const void>);
template array stage_array(const tensor4<double>&, std::size_t, std::shared_ptr<const void>);
template array combined_mask(const mask<float>&, std::size_t, bool);
template array combined_mask(const mask<double>&, std::size_t, bool);
template void append_stats(io::document&, const tensor4<float>&, const tensor4<float>&, const attention_result<float>&,
                           std::size_t, bool);
template void append_stats(io::document&, const tensor4<double>&, const tensor4<double>&,
                           const attention_result<double>&, std::size_t, bool);
template void append_head_stats(io::document&, const attention_result<float>&, const mask<float>&, std::size_t,
                                std::size_t);
template void append_head_stats(io::document&, const attention_result<double>&, const mask<double>&, std::size_t,
                                std::size_t);

}  // namespace attn::pipeline

namespace attn {

void check_planned_bytes(double bytes, const std::string& what, const std::string& shape, const std::string& remedy) {
    const std::size_t max = io::max_array_bytes();
    if (bytes > static_cast<double>(max))
        throw limit_error("", what + " needs about " + io::approximate_bytes(bytes) + " for its Tq×Tk stages (" + shape + ") " +
                                  "(expected at most --max-bytes " + io::limit_text(max) + "; " + remedy + ")");
}

}  // namespace attn
