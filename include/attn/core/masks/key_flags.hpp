#pragma once
/// \file key_flags.hpp
/// Padding keys given per key (B, Tk): a key_padding_mask (True = padding,
/// nn.MultiheadAttention; a float one is added as is), Hugging Face's attention_mask
/// (1 = a real token) and token ids equal to pad_id. Then the padding asked for, or
/// refused, is checked against every padding source (with the lengths term's).
/// attn mask term: key_flags_term, build order 20
#include <optional>

#include "attn/core/broadcast_mask.hpp"
#include "attn/core/mask_term.hpp"

namespace attn::core {

namespace masks {

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

}  // namespace masks

/// (B, Tk) "may attend" flags (1 = attend) from an integer or bool key_padding_mask, whose
/// True/non-zero entries are padding (nn.MultiheadAttention); a 1-D (Tk,) mask applies
/// to every item. Throws shape_error("key_padding_mask", …) for another shape.
inline std::vector<std::uint8_t> key_padding_allowed(const array& key_padding_mask, std::size_t B, std::size_t Tk) {
    return masks::per_key(key_padding_mask, B, Tk, "key_padding_mask", [](double v) { return v == 0.0; });
}

/// (B, Tk) "may attend" flags from token ids: ids equal to pad_id are padding.
/// Throws value_error for non-integer ids, shape_error("token_ids", …) for a wrong shape.
inline std::vector<std::uint8_t> token_ids_allowed(const array& token_ids, long long pad_id, std::size_t B,
                                                   std::size_t Tk) {
    if (!is_integer(token_ids.type))
        throw value_error("token_ids", "wrong dtype " + expected_got("integers", std::string(dtype_name(token_ids.type))));
    const double pad = static_cast<double>(pad_id);
    return masks::per_key(token_ids, B, Tk, "token_ids", [pad](double v) { return v != pad; });
}

/// (B, Tk) "may attend" flags from Hugging Face's attention_mask, (B, Tk) or (Tk,):
/// non-zero = a real token, 0 = padding (the inverse of key_padding_mask).
/// Throws shape_error("attention_mask", …) for another shape.
inline std::vector<std::uint8_t> attention_mask_allowed(const array& attention_mask, std::size_t B, std::size_t Tk) {
    return masks::per_key(attention_mask, B, Tk, "attention_mask", [](double v) { return v != 0.0; });
}

namespace masks {

/// The key_flags term (mask_term.hpp): per-key padding flags: padding keys hidden cell by cell
/// (mark), a float key_padding_mask added, pad_id recorded.
struct key_flags_term : term_base {
    /// Its settings in mask_settings.
    struct settings {
        std::optional<long long> pad_id;  ///< `pad_id`: token ids equal to it are padding keys
        bool padding_required = false;    ///< padding asked for: some padding source must be given
        bool padding_refused = false;     ///< no mask asked for: no padding source may be given
    };
    /// What build() computes, in mask<T>; any(): whether it masks anything.
    template <class T>
    struct state {
        std::vector<std::uint8_t> key_allowed;  ///< (B, Tk), 1 = may attend, or empty
        bool any() const { return !key_allowed.empty(); }
    };

    template <class T>
    static void build(build_context<T>& c) {
        const auto& spec = c.spec;
        auto& m = c.m;
        const std::size_t B = spec.B, Tk = spec.Tk;
        const std::array<std::size_t, 4> full{B, spec.Hq, spec.Tq, Tk};
        const auto add = [&](std::vector<std::uint8_t> allowed) {
            if (m.key_allowed.empty())
                m.key_allowed = std::move(allowed);
            else
                for (std::size_t i = 0; i < allowed.size(); ++i) m.key_allowed[i] &= allowed[i];
        };
        if (const array* kpm = spec.key_padding_mask) {
            c.padding = true;
            if (is_float(kpm->type)) {
                // A float key_padding_mask is added to the scores (nn.MultiheadAttention): (B, Tk)
                // or (Tk,) against the key axis.
                const std::string expected = shape_string({B, Tk});
                const auto s = broadcast_shape(*kpm, full, "key_padding_mask", false);
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
            c.padding = true;
            add(attention_mask_allowed(*hf, B, Tk));
        }
        if (spec.pad_id) {
            if (!spec.token_ids) throw usage_error("`pad_id`", "needs token ids " + expected_got("a token_ids array", "none"));
            c.padding = true;
            add(token_ids_allowed(*spec.token_ids, *spec.pad_id, B, Tk));
        }
        if (spec.padding_refused && c.padding)
            throw usage_error("`mask`", "none contradicts the padding sources given " +
                                            expected_got("no lengths, key_padding_mask, attention_mask or `pad_id`", "some"));
        if (spec.padding_required && !c.padding)
            throw usage_error("`mask`", "padding needs a source " +
                                            expected_got("`lengths`, a key_padding_mask, an attention_mask or token_ids with `pad_id`", "none"));
    }
    template <class T>
    static bool marks(const mask<T>& m, std::size_t, std::size_t, std::size_t) {
        return !m.key_allowed.empty();
    }
    template <class T>
    static void mark(const mask<T>& m, std::size_t b, std::size_t, std::size_t, std::size_t j0, std::size_t n,
                     std::uint8_t* masked) {
        const std::uint8_t* ka = m.key_allowed.data() + b * m.Tk + j0;
        for (std::size_t j = 0; j < n; ++j) masked[j] |= !ka[j];
    }
    /// meta.pad_id.
    template <class T>
    static void record(record_context<T>& c) {
        if (c.settings.pad_id) c.out.push_back({80, "pad_id", *c.settings.pad_id});
    }
};

}  // namespace masks
}  // namespace attn::core
