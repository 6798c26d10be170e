#include "attn/core/compare.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "attn/error.hpp"
#include "attn/text.hpp"

namespace attn::core {

tolerance default_tolerance(dtype t) {
    switch (t) {
        case dtype::f2: return {1e-3, 1e-5};
        case dtype::f4: return {1.3e-6, 1e-5};
        case dtype::f8: return {1e-7, 1e-7};
        default: return {0, 0};
    }
}

namespace {

/// Precision rank of a float dtype; 0 for integers and bool.
int float_rank(dtype t) { return t == dtype::f2 ? 1 : t == dtype::f4 ? 2 : t == dtype::f8 ? 3 : 0; }

}  // namespace

tolerance default_tolerance(dtype a, dtype b) {
    const int ra = float_rank(a), rb = float_rank(b);
    if (ra == 0 && rb == 0) return {0, 0};
    if (ra == 0) return default_tolerance(b);
    if (rb == 0) return default_tolerance(a);
    return default_tolerance(ra <= rb ? a : b);
}

compare_result compare(const array& a, const array& b, double rtol, double atol) {
    if (a.shape != b.shape)
        throw shape_error("compare", "shapes differ " + expected_got(shape_string(a.shape), shape_string(b.shape)));
    if (!(rtol >= 0) || !(atol >= 0))
        throw value_error("compare", "tolerances must be numbers ≥ 0 " +
                                         expected_got("rtol, atol ≥ 0", general_number(rtol) + ", " + general_number(atol)));
    compare_result r;
    r.count = a.size();
    bool have_nonfinite = false;
    double worst_factor = -1;
    for (std::size_t i = 0; i < r.count; ++i) {
        const double x = a.value(i), y = b.value(i);
        if (!std::isfinite(x) || !std::isfinite(y)) {
            const bool same = (std::isnan(x) && std::isnan(y)) || x == y;
            if (!same) {
                ++r.nonfinite_mismatched;
                ++r.mismatched;
                if (!have_nonfinite) {
                    have_nonfinite = true;
                    r.worst_offset = i;
                }
            }
            continue;
        }
        const double diff = std::abs(x - y);
        const double rel = diff == 0 ? 0.0 : y == 0 ? std::numeric_limits<double>::infinity() : diff / std::abs(y);
        const double allowed = atol + rtol * std::abs(y);
        if (diff > allowed) ++r.mismatched;
        if (diff > r.max_abs_error) r.max_abs_error = diff, r.max_abs_offset = i;
        if (rel > r.max_rel_error) r.max_rel_error = rel, r.max_rel_offset = i;
        // How far past its allowance an element is: 0 when equal, ∞ when any
        // difference faces an allowance of 0 (exact comparison).
        const double factor = diff == 0 ? 0.0 : allowed == 0 ? std::numeric_limits<double>::infinity() : diff / allowed;
        if (!have_nonfinite && factor > worst_factor) {
            worst_factor = factor;
            r.worst_offset = i;
        }
    }
    r.close = r.mismatched == 0;
    if (r.count > 0) {
        r.worst_index.assign(a.rank(), 0);
        std::size_t rest = r.worst_offset;
        for (std::size_t d = a.rank(); d-- > 0;) {
            r.worst_index[d] = rest % a.shape[d];
            rest /= a.shape[d];
        }
        r.worst_a = a.value(r.worst_offset);
        r.worst_b = b.value(r.worst_offset);
    }
    return r;
}

}  // namespace attn::core
