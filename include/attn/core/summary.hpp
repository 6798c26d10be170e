#pragma once
/// \file summary.hpp
/// Summary statistics of one array, as `attn inspect` prints them.

#include <cstddef>

#include "attn/tensor.hpp"

namespace attn::core {

/// min, max, mean and std over the finite elements of an array, with the non-finite
/// ones counted apart. Every dtype attn reads is accepted (bool as 0/1).
struct array_summary {
    std::size_t count = 0;    ///< all elements
    std::size_t finite = 0;   ///< elements entering min/max/mean/std
    std::size_t nan = 0, pos_inf = 0, neg_inf = 0;
    double min = 0, max = 0;  ///< NaN when there is no finite element
    double mean = 0;          ///< NaN when there is no finite element
    double std = 0;           ///< population standard deviation (NumPy's x.std(), ddof = 0); NaN likewise
};

/// Summarises `a`: accumulated in float64, two passes (mean, then squared deviations),
/// like `x[np.isfinite(x)].astype(np.float64)` then .min(), .max(), .mean(), .std().
array_summary summarize(const array& a);

}  // namespace attn::core
