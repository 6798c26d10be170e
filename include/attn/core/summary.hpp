#pragma once
/// \file summary.hpp
/// Summary statistics of one array, as `attn inspect` prints them.

#include <cstddef>
#include <limits>

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

/// summarize() of an array read in pieces (a file too large to hold): add() each piece
/// in element order, then add_squares() each piece again in the same order, then
/// result(): the same bits as summarize() of the whole, whose sums run in that order.
/// Throws nothing.
class summary_builder {
public:
    /// The first pass: counts, min, max and the sum of the finite elements of `piece`.
    void add(const array& piece);
    /// The second pass: the squared deviations from the mean of the first.
    void add_squares(const array& piece);
    /// The summary; std is NaN when there is no finite element.
    array_summary result() const;

private:
    array_summary s_;
    double sum_ = 0, squares_ = 0;
    double lo_ = std::numeric_limits<double>::infinity(), hi_ = -std::numeric_limits<double>::infinity();
};

}  // namespace attn::core
