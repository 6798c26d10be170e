#include "attn/core/masks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "attn/error.hpp"
#include "attn/text.hpp"

namespace attn::core {

template <class T>
std::size_t mask<T>::visible_end(std::size_t b, std::size_t i) const {
    std::size_t end = Tk;
    const auto clip = [&](long long e) { end = e <= 0 ? 0 : std::min<std::size_t>(end, static_cast<std::size_t>(e)); };
    if (causal) {
        const long long frontier = static_cast<long long>(i) + position_offset[b] + 1;
        clip(prefix.empty() ? frontier : std::max(frontier, static_cast<long long>(prefix[b])));
    }
    if (window_right >= 0) clip(static_cast<long long>(i) + position_offset[b] + window_right + 1);
    if (!lengths.empty()) end = std::min(end, lengths[b]);
    if (!doc_end.empty()) end = std::min(end, doc_end[b * Tk + i]);  // documents need Tq = Tk
    return end;
}

template <class T>
std::size_t mask<T>::visible_begin(std::size_t b, std::size_t i) const {
    std::size_t begin = doc_begin.empty() ? 0 : doc_begin[b * Tk + i];
    if (window_left < 0) return begin;
    const long long s = static_cast<long long>(i) + position_offset[b] - window_left;
    return std::max(begin, s <= 0 ? std::size_t{0} : std::min<std::size_t>(Tk, static_cast<std::size_t>(s)));
}

template <class T>
void mask<T>::mark_masked(std::size_t b, std::size_t h, std::size_t i, std::size_t j0, std::size_t j1,
                          std::vector<std::uint8_t>& masked) const {
    const std::size_t n = j1 - j0;
    const std::size_t end = std::clamp(visible_end(b, i), j0, j1) - j0;  // causal, right window, lengths
    const std::size_t begin = std::min(std::clamp(visible_begin(b, i), j0, j1) - j0, end);  // left window
    // Sink tokens stay visible left of the window (but not past the end).
    const std::size_t sinks = std::min(std::clamp(sink_tokens, j0, j1) - j0, begin);
    masked.assign(n, 0);
    std::fill(masked.begin() + static_cast<std::ptrdiff_t>(sinks), masked.begin() + static_cast<std::ptrdiff_t>(begin), 1);
    std::fill(masked.begin() + static_cast<std::ptrdiff_t>(end), masked.end(), 1);
    if (!key_allowed.empty()) {
        const std::uint8_t* ka = key_allowed.data() + b * Tk + j0;
        for (std::size_t j = 0; j < n; ++j) masked[j] |= !ka[j];
    }
    if (!document.empty()) {
        const std::int64_t* doc = document.data() + b * Tk;
        for (std::size_t j = 0; j < n; ++j) masked[j] |= doc[j0 + j] != doc[i];  // documents need Tq = Tk
    }
    for (const auto& m : allowed) {
        const std::uint8_t* r = m.row(b, h, i);
        const std::size_t len = m.shape[3];
        if (len == 1) {
            if (!r[0]) std::fill(masked.begin(), masked.end(), 1);
        } else {
            for (std::size_t j = 0; j < n; ++j) masked[j] |= j0 + j < len ? !r[j0 + j] : 1;
        }
    }
}

template <class T>
void mask<T>::add_alibi(std::size_t b, std::size_t h, std::size_t i, T* scores, std::size_t j0, std::size_t from,
                        std::size_t to) const {
    const T slope = alibi_slopes[b * H + h];
    const long long p = static_cast<long long>(i) + position_offset[b];
    for (std::size_t j = from; j < to; ++j)
        scores[j] -= slope * static_cast<T>(std::llabs(p - static_cast<long long>(j0 + j)));
}

template <class T>
void mask<T>::attend_row(std::size_t b, std::size_t h, std::size_t i, std::uint8_t* out) const {
    std::vector<std::uint8_t> masked;
    mark_masked(b, h, i, 0, Tk, masked);
    for (std::size_t j = 0; j < Tk; ++j) out[j] = !masked[j];
    constexpr T neg_inf = -std::numeric_limits<T>::infinity();
    for (const auto& m : bias) {
        const T* r = m.row(b, h, i);
        for (std::size_t j = 0; j < Tk; ++j)
            if (m.at(r, j, neg_inf) == neg_inf) out[j] = 0;
    }
}

template <class T>
bool mask<T>::apply_range(std::size_t b, std::size_t h, std::size_t i, const T* scaled, T* scores, std::size_t j0,
                          std::size_t j1) const {
    constexpr T neg_inf = -std::numeric_limits<T>::infinity();
    const bool inf_fill = std::isinf(fill) && fill < 0;
    const std::size_t n = j1 - j0;
    const std::size_t end = std::clamp(visible_end(b, i), j0, j1) - j0;  // visible prefix of the range
    const std::size_t begin = std::min(std::clamp(visible_begin(b, i), j0, j1) - j0, end);
    if (key_allowed.empty() && allowed.empty() && bias.empty() && document.empty() && (sink_tokens <= j0 || begin == 0)) {
        // Only causal/window/lengths: masked cells, a visible run [begin, end), masked
        // cells (the common case).
        for (std::size_t j = 0; j < begin; ++j) scores[j] = inf_fill ? scaled[j] + neg_inf : fill;
        if (scores != scaled) std::copy(scaled + begin, scaled + end, scores + begin);
        for (std::size_t j = end; j < n; ++j) scores[j] = inf_fill ? scaled[j] + neg_inf : fill;
        if (!alibi_slopes.empty()) add_alibi(b, h, i, scores, j0, begin, end);
        return inf_fill && begin == end && n > 0;
    }
    // Per-thread scratch: rows are applied by many threads at once.
    thread_local std::vector<std::uint8_t> masked;
    mark_masked(b, h, i, j0, j1, masked);
    bool full = inf_fill;
    for (std::size_t j = 0; j < n; ++j) {
        if (masked[j])
            scores[j] = inf_fill ? scaled[j] + neg_inf : fill;
        else {
            scores[j] = scaled[j];
            if (!alibi_slopes.empty()) add_alibi(b, h, i, scores, j0, j, j + 1);
            full = false;
        }
    }
    if (bias.empty()) return full && n > 0;
    // With float masks, a row is fully masked when every cell is −∞ from some source.
    thread_local std::vector<std::uint8_t> inf_cell;
    inf_cell.assign(n, 0);
    for (std::size_t j = 0; j < n; ++j) inf_cell[j] = masked[j] && inf_fill;
    for (const auto& m : bias) {
        const T* r = m.row(b, h, i);
        for (std::size_t j = 0; j < n; ++j) {
            const T v = m.at(r, j0 + j, neg_inf);
            scores[j] += v;
            if (v == neg_inf) inf_cell[j] = 1;
        }
    }
    return n > 0 && std::all_of(inf_cell.begin(), inf_cell.end(), [](std::uint8_t c) { return c != 0; });
}

template struct mask<float>;
template struct mask<double>;

namespace {

std::string num(std::size_t n) { return std::to_string(n); }
std::string rank_text(std::size_t r) { return num(r) + "-D"; }

/// (B, Tk) "may attend" flags from a rank-1/2 per-key array; rank 1 broadcasts over B.
template <class Allowed>
std::vector<std::uint8_t> per_key(const array& a, std::size_t B, std::size_t Tk, const char* name, Allowed allowed) {
    const bool fits = (a.rank() == 2 && a.shape[0] == B && a.shape[1] == Tk) || (a.rank() == 1 && a.shape[0] == Tk);
    if (!fits) throw shape_error(name, "wrong shape " + expected_got(shape_string({B, Tk}), shape_string(a.shape)));
    std::vector<std::uint8_t> out(B * Tk);
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t j = 0; j < Tk; ++j) out[b * Tk + j] = allowed(a.value(a.rank() == 2 ? b * Tk + j : j));
    return out;
}

}  // namespace

std::vector<std::size_t> valid_lengths(const mask_spec& spec) {
    std::vector<std::size_t> lengths = spec.lengths;
    const char* source = "`lengths`";
    if (lengths.empty() && spec.lengths_array) {
        const array* la = spec.lengths_array;
        source = "lengths";
        if (la->rank() != 1 || !is_integer(la->type))
            throw value_error("lengths", "wrong kind " + expected_got("1-D integers", rank_text(la->rank()) + " " +
                                                                          std::string(dtype_name(la->type))));
        for (auto v : la->to_vector<std::int64_t>()) {
            if (v < 0) throw value_error("lengths", "negative length " + expected_got("≥ 0", std::to_string(v)));
            lengths.push_back(static_cast<std::size_t>(v));
        }
    }
    if (lengths.empty()) return lengths;
    // An option that does not fit the inputs is a usage error (README, exit codes); an
    // array that does not fit the others is a data error.
    const auto fail = [&](const std::string& what) {
        if (spec.lengths.empty()) throw value_error(source, what);
        throw usage_error(source, what);
    };
    if (lengths.size() != spec.B)
        fail("one length per batch item " +
             expected_got(num(spec.B) + (spec.B == 1 ? " value" : " values"), num(lengths.size())));
    for (auto l : lengths)
        if (l > spec.Tk) fail("length exceeds the number of keys " + expected_got("≤ " + num(spec.Tk), num(l)));
    return lengths;
}

std::vector<std::int64_t> documents_from_cu_seqlens(const std::vector<std::size_t>& cu) {
    bool ok = !cu.empty() && cu[0] == 0;
    for (std::size_t k = 1; ok && k < cu.size(); ++k) ok = cu[k] > cu[k - 1];
    if (!ok) {
        std::string got;
        for (auto c : cu) got += (got.empty() ? "" : ",") + std::to_string(c);
        throw usage_error("`cu_seqlens`", "not cumulative lengths " + expected_got("0 then increasing, e.g. 0,3,7", got));
    }
    std::vector<std::int64_t> ids(cu.back());
    for (std::size_t k = 0; k + 1 < cu.size(); ++k)
        for (std::size_t t = cu[k]; t < cu[k + 1]; ++t) ids[t] = static_cast<std::int64_t>(k);
    return ids;
}

std::vector<double> alibi_slopes(std::size_t heads) {
    if (heads == 0) throw value_error("`alibi`", "needs heads " + expected_got("≥ 1", "0"));
    const auto power_of_two = [](std::size_t n) {
        std::vector<double> s(n);
        const double start = std::exp2(-8.0 / static_cast<double>(n));
        for (std::size_t i = 0; i < n; ++i) s[i] = std::pow(start, static_cast<double>(i + 1));
        return s;
    };
    std::size_t p2 = 1;
    while (p2 * 2 <= heads) p2 *= 2;
    std::vector<double> slopes = power_of_two(p2);
    const std::vector<double> twice = power_of_two(2 * p2);
    for (std::size_t i = 0; slopes.size() < heads; i += 2) slopes.push_back(twice[i]);
    return slopes;
}

std::vector<long long> causal_offsets(causal_align align, std::size_t B, std::size_t Tq, std::size_t Tk,
                                      std::size_t past, const std::vector<std::size_t>& lengths) {
    std::vector<long long> offsets(B);
    for (std::size_t b = 0; b < B; ++b) {
        const std::size_t valid = lengths.empty() ? Tk : lengths[b];
        offsets[b] = align == causal_align::top_left ? static_cast<long long>(past)
                                                     : static_cast<long long>(valid) - static_cast<long long>(Tq);
    }
    return offsets;
}

std::vector<std::uint8_t> key_padding_allowed(const array& key_padding_mask, std::size_t B, std::size_t Tk) {
    return per_key(key_padding_mask, B, Tk, "key_padding_mask", [](double v) { return v == 0.0; });
}

std::vector<std::uint8_t> token_ids_allowed(const array& token_ids, long long pad_id, std::size_t B, std::size_t Tk) {
    if (!is_integer(token_ids.type))
        throw value_error("token_ids", "wrong dtype " + expected_got("integers", std::string(dtype_name(token_ids.type))));
    const double pad = static_cast<double>(pad_id);
    return per_key(token_ids, B, Tk, "token_ids", [pad](double v) { return v != pad; });
}

std::array<std::size_t, 4> broadcast_shape(const array& a, const std::array<std::size_t, 4>& full, const char* name,
                                           bool batch_first) {
    if (a.rank() > 4 || a.rank() == 0)
        throw shape_error(name, "wrong rank " + expected_got("1-D to 4-D", rank_text(a.rank())));
    std::array<std::size_t, 4> s{1, 1, 1, 1};
    if (batch_first && a.rank() == 3 && full[1] > 1 && a.shape[0] == full[0] * full[1])
        s = {full[0], full[1], a.shape[1], a.shape[2]};  // nn.MultiheadAttention's (B·Hq, Tq, Tk)
    else if (batch_first && a.rank() == 3)               // (B, Tq, Tk): the heads broadcast
        s = {a.shape[0], 1, a.shape[1], a.shape[2]};
    else
        std::copy(a.shape.begin(), a.shape.end(), s.begin() + static_cast<std::ptrdiff_t>(4 - a.rank()));
    bool ok = s[3] >= 1 && s[3] <= full[3];
    for (int d = 0; d < 3; ++d) ok = ok && (s[d] == 1 || s[d] == full[d]);
    if (!ok)
        throw shape_error(name, "does not broadcast to (B, Hq, Tq, Tk) " +
                                    expected_got(shape_string({full[0], full[1], full[2], full[3]}), shape_string(a.shape)));
    return s;
}

broadcast_mask<std::uint8_t> bool_attn_mask(const array& attn_mask, const std::array<std::size_t, 4>& full,
                                            bool batch_first, bool true_masks) {
    broadcast_mask<std::uint8_t> bm;
    bm.shape = broadcast_shape(attn_mask, full, "attn_mask", batch_first);
    bm.data.resize(attn_mask.size());
    for (std::size_t i = 0; i < attn_mask.size(); ++i) bm.data[i] = (attn_mask.value(i) != 0.0) != true_masks;
    return bm;
}

std::vector<std::uint8_t> attention_mask_allowed(const array& attention_mask, std::size_t B, std::size_t Tk) {
    return per_key(attention_mask, B, Tk, "attention_mask", [](double v) { return v != 0.0; });
}

template <class T>
broadcast_mask<T> float_mask(const array& values, const std::array<std::size_t, 4>& full, const char* name,
                             bool batch_first) {
    broadcast_mask<T> bm;
    bm.shape = broadcast_shape(values, full, name, batch_first);
    bm.data = values.to_vector<T>();
    return bm;
}

template <class T>
mask<T> build_mask(const mask_spec& spec, std::vector<std::string>& used) {
    const std::size_t B = spec.B, Tk = spec.Tk;
    mask<T> m;
    m.B = B, m.H = spec.Hq, m.Tq = spec.Tq, m.Tk = Tk;
    if (spec.fill) m.fill = static_cast<T>(*spec.fill);
    m.lengths = valid_lengths(spec);
    const std::array<std::size_t, 4> full{B, spec.Hq, spec.Tq, Tk};

    bool padding = !m.lengths.empty();
    if (const array* kpm = spec.key_padding_mask) {
        padding = true;
        if (is_float(kpm->type)) {
            // A float key_padding_mask is added to the scores (nn.MultiheadAttention): (B, Tk)
            // or (Tk,) against the key axis.
            const std::string expected = shape_string({B, Tk});
            const auto s = broadcast_shape(*kpm, full, "key_padding_mask");
            if (kpm->rank() != 2 && kpm->rank() != 1)
                throw shape_error("key_padding_mask", "wrong shape " + expected_got(expected, shape_string(kpm->shape)));
            broadcast_mask<T> bm;
            bm.shape = kpm->rank() == 2 ? std::array<std::size_t, 4>{kpm->shape[0], 1, 1, kpm->shape[1]} : s;
            if (bm.shape[3] != Tk || (bm.shape[0] != B && bm.shape[0] != 1))
                throw shape_error("key_padding_mask", "wrong shape " + expected_got(expected, shape_string(kpm->shape)));
            bm.data = kpm->to_vector<T>();
            m.bias.push_back(std::move(bm));
        } else {
            m.key_allowed = key_padding_allowed(*kpm, B, Tk);
        }
    }
    if (const array* hf = spec.attention_mask) {
        padding = true;
        auto allowed = attention_mask_allowed(*hf, B, Tk);
        if (m.key_allowed.empty())
            m.key_allowed = std::move(allowed);
        else
            for (std::size_t i = 0; i < allowed.size(); ++i) m.key_allowed[i] &= allowed[i];
    }
    if (spec.pad_id) {
        if (!spec.token_ids) throw usage_error("`pad_id`", "needs token ids " + expected_got("a token_ids array", "none"));
        padding = true;
        auto allowed = token_ids_allowed(*spec.token_ids, *spec.pad_id, B, Tk);
        if (m.key_allowed.empty())
            m.key_allowed = std::move(allowed);
        else
            for (std::size_t i = 0; i < allowed.size(); ++i) m.key_allowed[i] &= allowed[i];
    }
    if (spec.padding_refused && padding)
        throw usage_error("`mask`", "none contradicts the padding sources given " +
                                        expected_got("no lengths, key_padding_mask, attention_mask or `pad_id`", "some"));
    if (spec.padding_required && !padding)
        throw usage_error("`mask`", "padding needs a source " +
                                        expected_got("`lengths`, a key_padding_mask, an attention_mask or token_ids with `pad_id`", "none"));
    if (spec.window_left < -1 || spec.window_right < -1)
        throw usage_error("`window`", "each side is -1 (unbounded) or ≥ 0 " +
                                          expected_got("LEFT[,RIGHT] ≥ -1", std::to_string(spec.window_left) + "," +
                                                                                std::to_string(spec.window_right)));
    const bool window = spec.window_left >= 0 || spec.window_right >= 0;
    const bool alibi = spec.alibi || spec.alibi_slopes;
    if (spec.causal || window || alibi) m.position_offset = causal_offsets(spec.align, B, spec.Tq, Tk, spec.past, m.lengths);
    if (spec.causal) {
        m.causal = true;
        used.push_back("causal");
    }
    if (window) {
        m.window_left = spec.window_left;
        m.window_right = spec.window_right;
        used.push_back("window");
    }
    if (!spec.prefix.empty()) {
        if (!spec.causal)
            throw usage_error("`prefix_len`", "widens the causal mask " + expected_got("`causal`", "no causal mask"));
        if (spec.prefix.size() != 1 && spec.prefix.size() != B)
            throw usage_error("`prefix_len`", "one length, or one per batch item " +
                                                  expected_got(B == 1 ? "1 value" : "1 or " + num(B) + " values", num(spec.prefix.size())));
        m.prefix.assign(B, spec.prefix[0]);
        if (spec.prefix.size() == B) m.prefix = spec.prefix;
        for (const std::size_t n : m.prefix)
            if (n > Tk) throw usage_error("`prefix_len`", "longer than the keys " + expected_got("≤ " + num(Tk), num(n)));
        used.push_back("prefix");
    }
    if (spec.sink_tokens > 0) {
        if (spec.window_left < 0)
            throw usage_error("`sink_tokens`", "keeps keys visible through a left window " +
                                                   expected_got("`window` LEFT", "no left window"));
        m.sink_tokens = spec.sink_tokens;
        used.push_back("sink_tokens");
    }
    if (const array* docs = spec.document_ids) {
        // Query i is position i: documents describe one packed sequence attending to itself.
        if (spec.Tq != Tk || spec.past != 0)
            throw value_error("document_ids", "need self-attention without a cache " +
                                                  expected_got("Tq = Tk", "Tq = " + num(spec.Tq) + ", Tk = " + num(Tk)));
        if (!is_integer(docs->type))
            throw value_error("document_ids", "wrong dtype " + expected_got("integers", std::string(dtype_name(docs->type))));
        const bool fits = (docs->rank() == 2 && docs->shape[0] == B && docs->shape[1] == Tk) ||
                          (docs->rank() == 1 && docs->shape[0] == Tk);
        if (!fits && spec.documents_from_cu_seqlens)
            throw usage_error("`cu_seqlens`", "does not end at the sequence length " +
                                                  expected_got("a last value of " + num(Tk), num(docs->size())));
        if (!fits)
            throw shape_error("document_ids", "wrong shape " + expected_got(shape_string({B, Tk}) + " or " +
                                                                                shape_string({Tk}),
                                                                            shape_string(docs->shape)));
        std::vector<std::int64_t> ids(B * Tk);
        const std::vector<std::int64_t> given = docs->to_vector<std::int64_t>();
        for (std::size_t b = 0; b < B; ++b)
            std::copy_n(given.data() + (docs->rank() == 2 ? b * Tk : 0), Tk, ids.data() + b * Tk);
        // Runs of equal ids; when every id is one run, the runs are the visible ranges.
        m.doc_begin.resize(B * Tk);
        m.doc_end.resize(B * Tk);
        bool runs = true;
        for (std::size_t b = 0; b < B; ++b) {
            std::vector<std::int64_t> seen;
            for (std::size_t t = 0; t < Tk;) {
                std::size_t e = t;
                while (e < Tk && ids[b * Tk + e] == ids[b * Tk + t]) ++e;
                if (std::find(seen.begin(), seen.end(), ids[b * Tk + t]) != seen.end()) runs = false;
                seen.push_back(ids[b * Tk + t]);
                for (std::size_t u = t; u < e; ++u) m.doc_begin[b * Tk + u] = t, m.doc_end[b * Tk + u] = e;
                t = e;
            }
        }
        if (!runs) {
            m.doc_begin.clear();
            m.doc_end.clear();
            m.document = std::move(ids);
        }
        if (spec.sink_tokens > 0)
            throw usage_error("`sink_tokens`", "would cross documents " + expected_got("documents or sink tokens", "both"));
        used.push_back("documents");
    }
    if (alibi) {
        if (spec.alibi && spec.alibi_slopes)
            throw usage_error("`alibi`", "slopes given twice " + expected_got("`alibi` or `alibi_slopes`", "both"));
        m.alibi_slopes.resize(B * spec.Hq);
        if (const array* s = spec.alibi_slopes) {
            const bool per_item = s->rank() == 2 && s->shape[0] == B && s->shape[1] == spec.Hq;
            if (!per_item && !(s->rank() == 1 && s->shape[0] == spec.Hq))
                throw shape_error("alibi_slopes", "wrong shape " + expected_got("(Hq,) = " + shape_string({spec.Hq}) +
                                                                                   " or (B, Hq) = " + shape_string({B, spec.Hq}),
                                                                               shape_string(s->shape)));
            for (std::size_t b = 0; b < B; ++b)
                for (std::size_t h = 0; h < spec.Hq; ++h) {
                    // As sinks: a NaN slope would give a head of NaN weights.
                    const double slope = s->value(per_item ? b * spec.Hq + h : h);
                    if (!std::isfinite(slope))
                        throw value_error("alibi_slopes", "not finite " + expected_got("finite slopes", general_number(slope)));
                    m.alibi_slopes[b * spec.Hq + h] = static_cast<T>(slope);
                }
        } else {
            const std::vector<double> slopes = alibi_slopes(spec.Hq);
            for (std::size_t b = 0; b < B; ++b)
                for (std::size_t h = 0; h < spec.Hq; ++h) m.alibi_slopes[b * spec.Hq + h] = static_cast<T>(slopes[h]);
        }
        used.push_back("alibi");
    }
    if (padding) used.push_back("padding");
    if (const array* am = spec.attn_mask) {
        if (is_float(am->type))
            m.bias.push_back(float_mask<T>(*am, full, "attn_mask", spec.rank3_masks));
        else
            m.allowed.push_back(bool_attn_mask(*am, full, spec.rank3_masks, spec.attn_mask_true_masks));
        used.push_back("attn_mask");
    }
    return m;
}

template broadcast_mask<float> float_mask<float>(const array&, const std::array<std::size_t, 4>&, const char*, bool);
template broadcast_mask<double> float_mask<double>(const array&, const std::array<std::size_t, 4>&, const char*, bool);
template mask<float> build_mask<float>(const mask_spec&, std::vector<std::string>&);
template mask<double> build_mask<double>(const mask_spec&, std::vector<std::string>&);

}  // namespace attn::core
