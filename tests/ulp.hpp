#pragma once
// Errors in units of the last place, for the tests that hold vector code to a scalar
// long double reference (tests/core/test_isa_rowops.cpp, test_activation.cpp).
#include <cmath>
#include <limits>

namespace attn_test {

/// |got − exact| in units of the last place of the T nearest to exact (subnormal
/// results: units of the smallest subnormal).
template <class T>
double ulp_error(T got, long double exact) {
    const T nearest = static_cast<T>(exact);
    T ulp = std::nextafter(std::fabs(nearest), std::numeric_limits<T>::infinity()) - std::fabs(nearest);
    if (std::fabs(nearest) < std::numeric_limits<T>::min()) ulp = std::numeric_limits<T>::denorm_min();
    return static_cast<double>(std::fabs(static_cast<long double>(got) - exact) / ulp);
}

}  // namespace attn_test
