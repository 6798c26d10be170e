#pragma once
/// \file pool.hpp
/// Memory for the compute tensors. Large blocks (≥ 4 MiB) are 2 MiB-aligned, asked to
/// be backed by transparent huge pages, and kept after they are freed so that the next
/// tensor of a similar size reuses them: a fresh 2048×2048×8 float32 weights tensor
/// costs ~15 ms of kernel page clearing (docs/toolchain.md §5), which a process that
/// computes attention repeatedly (a batch, a test sweep, a benchmark) pays only once.
/// The cache is bounded (pool_cache_limit()); blocks beyond it go back to the system.

#include <cstddef>

namespace attn::core {

/// Bytes of freed blocks the pool may keep: an eighth of physical memory, at most 2 GiB.
std::size_t pool_cache_limit();

/// Bytes currently held by freed blocks waiting for reuse.
std::size_t pool_cached_bytes();

/// Returns every cached block to the system.
void pool_release();

/// `bytes` of memory from the pool (malloc alignment; 2 MiB-aligned for large blocks):
/// a cached freed block of a close size if there is one. Throws std::bad_alloc.
void* pool_allocate(std::size_t bytes);
/// Returns a block from pool_allocate of the same `bytes` (kept for reuse when large).
void pool_deallocate(void* p, std::size_t bytes) noexcept;

/// Standard allocator over the pool, for xtensor containers (tensor2/3/4 in heads.hpp).
template <class T>
struct pool_allocator {
    using value_type = T;
    pool_allocator() noexcept = default;
    template <class U>
    pool_allocator(const pool_allocator<U>&) noexcept {}
    T* allocate(std::size_t n) { return static_cast<T*>(pool_allocate(n * sizeof(T))); }
    void deallocate(T* p, std::size_t n) noexcept { pool_deallocate(p, n * sizeof(T)); }
    template <class U>
    bool operator==(const pool_allocator<U>&) const noexcept { return true; }
    template <class U>
    bool operator!=(const pool_allocator<U>&) const noexcept { return false; }
};

}  // namespace attn::core
