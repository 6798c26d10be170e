#pragma once
/// \file memory.hpp
/// The process's memory policy, beside its thread policy (threads.hpp). The library
/// allocates its tensors with std::allocator (core/heads.hpp) and keeps nothing between
/// calls; a program that computes attention repeatedly (the attn CLI's batches, a
/// benchmark, a sweep) calls keep_freed_memory() once at start-up so that freed large
/// tensors are reused instead of being returned to the system and page-faulted afresh
/// (a fresh 512 MiB weights tensor costs ~60 ms of kernel page clearing here).

#include <cstddef>

namespace attn {

/// The default for keep_freed_memory: an eighth of physical memory, at most 2 GiB.
std::size_t default_kept_memory() noexcept;

/// Process-wide, once at start-up, before other threads allocate: glibc's malloc serves
/// every block from its heaps (mallopt M_MMAP_MAX = 0, so large blocks are no longer
/// separate mappings unmapped on free) and returns free memory at the top of the main
/// heap to the system only beyond `limit` bytes (M_TRIM_THRESHOLD). Freed blocks are
/// then reused by the next allocations of a similar size. Returns false, changing
/// nothing that matters, when the C library refuses (a sanitizer's allocator).
bool keep_freed_memory(std::size_t limit = default_kept_memory()) noexcept;

}  // namespace attn
