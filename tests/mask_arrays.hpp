#pragma once
// Small integer and bool arrays for the mask tests (token ids, lengths, key_padding_mask,
// bool attn_mask), in C order.
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "attn/tensor.hpp"

namespace attn_test {

/// An int64 array of `shape` holding `v`.
inline attn::array ints(attn::shape_t shape, const std::vector<std::int64_t>& v) {
    return attn::int64_array(std::move(shape), v);
}

/// A bool array of `shape` holding `v` (0 = False).
inline attn::array bools(attn::shape_t shape, const std::vector<std::uint8_t>& v) {
    attn::array a;
    a.type = attn::dtype::b1;
    a.shape = std::move(shape);
    a.data.resize(v.size());
    std::memcpy(a.data.data(), v.data(), v.size());
    return a;
}

}  // namespace attn_test
