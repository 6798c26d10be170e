#include "attn/core/summary.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attn::core {

void summary_builder::add(const array& piece) {
    const std::size_t n = piece.size();
    s_.count += n;
    for (std::size_t i = 0; i < n; ++i) {
        const double v = piece.value(i);
        if (std::isnan(v)) {
            ++s_.nan;
        } else if (std::isinf(v)) {
            ++(v > 0 ? s_.pos_inf : s_.neg_inf);
        } else {
            ++s_.finite;
            sum_ += v;
            lo_ = std::min(lo_, v);
            hi_ = std::max(hi_, v);
        }
    }
}

void summary_builder::add_squares(const array& piece) {
    if (s_.finite == 0) return;
    const double mean = sum_ / static_cast<double>(s_.finite);
    for (std::size_t i = 0, n = piece.size(); i < n; ++i) {
        const double v = piece.value(i);
        if (std::isfinite(v)) squares_ += (v - mean) * (v - mean);
    }
}

array_summary summary_builder::result() const {
    array_summary s = s_;
    if (s.finite == 0) {
        s.min = s.max = s.mean = s.std = std::numeric_limits<double>::quiet_NaN();
        return s;
    }
    s.min = lo_;
    s.max = hi_;
    s.mean = sum_ / static_cast<double>(s.finite);
    s.std = std::sqrt(squares_ / static_cast<double>(s.finite));
    return s;
}

array_summary summarize(const array& a) {
    summary_builder b;
    b.add(a);
    b.add_squares(a);
    return b.result();
}

}  // namespace attn::core
