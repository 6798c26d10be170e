#include "attn/core/summary.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attn::core {

array_summary summarize(const array& a) {
    array_summary s;
    s.count = a.size();
    double sum = 0;
    double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < s.count; ++i) {
        const double v = a.value(i);
        if (std::isnan(v)) {
            ++s.nan;
        } else if (std::isinf(v)) {
            ++(v > 0 ? s.pos_inf : s.neg_inf);
        } else {
            ++s.finite;
            sum += v;
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
    }
    if (s.finite == 0) {
        s.min = s.max = s.mean = s.std = std::numeric_limits<double>::quiet_NaN();
        return s;
    }
    s.min = lo;
    s.max = hi;
    s.mean = sum / static_cast<double>(s.finite);
    double squares = 0;
    for (std::size_t i = 0; i < s.count; ++i) {
        const double v = a.value(i);
        if (std::isfinite(v)) squares += (v - s.mean) * (v - s.mean);
    }
    s.std = std::sqrt(squares / static_cast<double>(s.finite));
    return s;
}

}  // namespace attn::core
