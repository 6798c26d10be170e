#pragma once
/// \file compare.hpp
/// Closeness of two arrays, as torch.testing.assert_close judges it: actual and
/// expected are close when every element satisfies |actual − expected| ≤ atol + rtol·|expected|,
/// after NaN and ±∞ have been required to agree by position (and sign).

#include <cstddef>

#include "attn/tensor.hpp"

namespace attn::core {

/// A pair of tolerances.
struct tolerance {
    double rtol = 0, atol = 0;
};

/// torch.testing.assert_close's default tolerances for a dtype: float16 rtol 1e-3,
/// atol 1e-5; float32 rtol 1.3e-6, atol 1e-5; float64 rtol 1e-7, atol 1e-7; integers
/// and bool 0, 0 (exact).
tolerance default_tolerance(dtype t);

/// The defaults for comparing a with b: those of the less precise dtype of the two,
/// where float16 < float32 < float64, and a float dtype decides over an integer or
/// bool one (float32 vs int64 → float32's). Two integer/bool arrays compare exactly.
tolerance default_tolerance(dtype a, dtype b);

/// What compare() found. Errors are over the pairs where both values are finite.
struct compare_result {
    bool close = true;
    std::size_t count = 0;               ///< elements compared
    std::size_t mismatched = 0;          ///< elements outside the tolerance (non-finite mismatches included)
    std::size_t nonfinite_mismatched = 0;///< positions where NaN/±∞ do not agree
    double max_abs_error = 0;            ///< max |a − b|
    double max_rel_error = 0;            ///< max |a − b| / |b| (0/0 = 0, x/0 = ∞)
    /// The element that decides: the first non-finite mismatch if any, else the one
    /// that exceeds its allowance atol + rtol·|b| by the largest factor (the first
    /// of equals; element 0 when all are equal). C-order offset and multi-index.
    std::size_t worst_offset = 0;
    shape_t worst_index;
    double worst_a = 0, worst_b = 0;     ///< the two values there
    /// Where the largest |a − b| and the largest relative error occur among finite
    /// pairs (C-order offsets, the first of equals; 0 when all are equal).
    std::size_t max_abs_offset = 0, max_rel_offset = 0;
};

/// Compares `a` (actual) with `b` (expected), element by element in double (float16
/// decoded exactly). NaN must face NaN and ±∞ the same infinity, before any tolerance;
/// then |a − b| ≤ atol + rtol·|b| must hold everywhere (torch.testing.assert_close
/// with equal_nan=True). Throws shape_error (source "compare") when the shapes differ,
/// value_error when rtol or atol is negative or NaN.
compare_result compare(const array& a, const array& b, double rtol, double atol);

}  // namespace attn::core
