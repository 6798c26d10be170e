#pragma once
// Internal: memory hints for the kernel's large result tensors.

#include <cstddef>
#include <cstdint>

#include <sys/mman.h>

namespace attn::core {

/// Asks the kernel to back the 2 MiB-aligned interior of [p, p + bytes) with
/// transparent huge pages (madvise MADV_HUGEPAGE; this machine kind's THP mode is
/// "madvise"). Call before the first write: a fresh 512 MiB weights tensor then takes
/// 256 page faults instead of 131072. A hint: failure (or a small block) only costs speed.
inline void advise_huge_pages(void* p, std::size_t bytes) noexcept {
    constexpr std::uintptr_t huge_page = std::uintptr_t{2} << 20;
    const auto begin = (reinterpret_cast<std::uintptr_t>(p) + huge_page - 1) / huge_page * huge_page;
    const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes) / huge_page * huge_page;
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

/// A (row-major, uninitialised) xtensor of `shape`, large ones on huge pages.
template <class Tensor, class Shape>
Tensor fresh_tensor(const Shape& shape) {
    auto t = Tensor::from_shape(shape);
    advise_huge_pages(t.data(), t.size() * sizeof(typename Tensor::value_type));
    return t;
}

}  // namespace attn::core
