#pragma once
// Comparing an attn output array with an expected one (ONNX vectors, PyTorch fixtures):
// an allclose that knows NaN and ±∞, with a summary that names the worst element.
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "attn/tensor.hpp"

namespace attn_test {

/// "(1, 0, 3, 5)": the multi-index of flat C-order position `flat` in `shape`.
inline std::string index_string(const attn::shape_t& shape, std::size_t flat) {
    std::vector<std::size_t> idx(shape.size());
    for (std::size_t d = shape.size(); d-- > 0;) {
        idx[d] = shape[d] == 0 ? 0 : flat % shape[d];
        flat = shape[d] == 0 ? 0 : flat / shape[d];
    }
    std::ostringstream s;
    s << "(";
    for (std::size_t d = 0; d < idx.size(); ++d) s << (d ? ", " : "") << idx[d];
    s << (idx.size() == 1 ? ",)" : ")");
    return s.str();
}

/// Result of comparing an attn output with an ONNX expected array.
struct comparison {
    bool ok = true;
    std::string summary;  // shape, max |a-e| and where, first NaN/inf or tolerance failure
};

/// allclose that knows NaN and ±inf: shapes equal; NaN and ±inf must agree by position
/// and sign before any tolerance; finite pairs need |a-e| <= atol + rtol·|e|.
inline comparison compare_arrays(const attn::array& got, const attn::array& want, double atol, double rtol) {
    comparison c;
    std::ostringstream s;
    s.precision(17);
    if (got.shape != want.shape) {
        c.ok = false;
        s << "shape " << attn::shape_string(got.shape) << " != expected " << attn::shape_string(want.shape);
        c.summary = s.str();
        return c;
    }
    double max_abs = 0.0;
    std::size_t max_at = 0, nonfinite_bad = 0, tol_bad = 0;
    std::size_t first_nonfinite = 0, first_tol = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        const double a = got.value(i), e = want.value(i);
        if (std::isnan(a) || std::isnan(e) || std::isinf(a) || std::isinf(e)) {
            const bool same = (std::isnan(a) && std::isnan(e)) || a == e;  // a == e: same infinity
            if (!same && nonfinite_bad++ == 0) first_nonfinite = i;
            continue;
        }
        const double d = std::fabs(a - e);
        if (d > max_abs) max_abs = d, max_at = i;
        if (d > atol + rtol * std::fabs(e) && tol_bad++ == 0) first_tol = i;
    }
    c.ok = nonfinite_bad == 0 && tol_bad == 0;
    s << "shape " << attn::shape_string(want.shape) << ", max |a-e| = " << max_abs << " at "
      << index_string(want.shape, max_at);
    if (want.size() > 0) s << " (got " << got.value(max_at) << ", expected " << want.value(max_at) << ")";
    if (nonfinite_bad > 0)
        s << "; " << nonfinite_bad << " NaN/inf mismatches, first at " << index_string(want.shape, first_nonfinite)
          << " (got " << got.value(first_nonfinite) << ", expected " << want.value(first_nonfinite) << ")";
    if (tol_bad > 0)
        s << "; " << tol_bad << " of " << want.size() << " elements outside atol=" << atol << " + rtol=" << rtol
          << "·|e|, first at " << index_string(want.shape, first_tol) << " (got " << got.value(first_tol)
          << ", expected " << want.value(first_tol) << ")";
    c.summary = s.str();
    return c;
}

}  // namespace attn_test
