#pragma once
// Mask arrays broadcast right-aligned against the scores (B, Hq, Tq, Tk): what the
// bool and float attn_mask terms and a float key_padding_mask are read through.
#include "term.hpp"

namespace attn::core {

std::array<std::size_t, 4> broadcast_shape(const array& a, const std::array<std::size_t, 4>& full, const char* name,
                                           bool batch_first) {
    if (a.rank() > 4 || a.rank() == 0)
        throw shape_error(name, "wrong rank " + expected_got("1-D to 4-D", masks::num(a.rank()) + "-D"));
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

template <class T>
broadcast_mask<T> float_mask(const array& values, const std::array<std::size_t, 4>& full, const char* name,
                             bool batch_first) {
    broadcast_mask<T> bm;
    bm.shape = broadcast_shape(values, full, name, batch_first);
    bm.data = values.to_vector<T>();
    return bm;
}

template broadcast_mask<float> float_mask<float>(const array&, const std::array<std::size_t, 4>&, const char*, bool);
template broadcast_mask<double> float_mask<double>(const array&, const std::array<std::size_t, 4>&, const char*, bool);

}  // namespace attn::core
