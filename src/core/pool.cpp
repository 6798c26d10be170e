#include "attn/core/pool.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

namespace attn::core {

namespace {

constexpr std::size_t large_block = std::size_t{4} << 20;
constexpr std::size_t huge_page = std::size_t{2} << 20;

struct cached_block {
    void* p;
    std::size_t bytes;  // rounded up to huge_page
};

/// Freed large blocks, oldest first.
struct block_cache {
    std::mutex mutex;
    std::vector<cached_block> blocks;
    std::size_t bytes = 0;
};

block_cache& cache() {
    // Built on first use, not at static initialisation, and never destroyed: tensors
    // freed by other static destructors may still come back to it, and at exit the
    // cached blocks stay reachable from here (no LeakSanitizer report).
    static block_cache* const c = new block_cache;
    return *c;
}

std::size_t rounded(std::size_t bytes) { return (bytes + huge_page - 1) / huge_page * huge_page; }

}  // namespace

std::size_t pool_cache_limit() {
    static const std::size_t limit = [] {
        const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        const std::size_t ram = pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * page : 0;
        return std::min<std::size_t>(ram / 8, std::size_t{2} << 30);
    }();
    return limit;
}

std::size_t pool_cached_bytes() {
    block_cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    return c.bytes;
}

void pool_release() {
    block_cache& c = cache();
    std::vector<cached_block> blocks;
    {
        std::lock_guard<std::mutex> lock(c.mutex);
        blocks.swap(c.blocks);
        c.bytes = 0;
    }
    for (const cached_block& b : blocks) std::free(b.p);
}

// The allocator's two entry points (pool.hpp).

void* pool_allocate(std::size_t bytes) {
    if (bytes < large_block) {
        void* p = std::malloc(std::max<std::size_t>(bytes, 1));  // 16-byte aligned; loads are unaligned
        if (!p) throw std::bad_alloc();
        return p;
    }
    const std::size_t size = rounded(bytes);
    block_cache& c = cache();
    {
        // The smallest cached block that fits and wastes at most a quarter of itself.
        std::lock_guard<std::mutex> lock(c.mutex);
        auto best = c.blocks.end();
        for (auto it = c.blocks.begin(); it != c.blocks.end(); ++it)
            if (it->bytes >= size && it->bytes - size <= it->bytes / 4 &&
                (best == c.blocks.end() || it->bytes < best->bytes))
                best = it;
        if (best != c.blocks.end()) {
            void* p = best->p;
            c.bytes -= best->bytes;
            c.blocks.erase(best);
            return p;
        }
    }
    void* p = std::aligned_alloc(huge_page, size);
    if (!p) throw std::bad_alloc();
    madvise(p, size, MADV_HUGEPAGE);  // a hint: failure only costs speed
    return p;
}

void pool_deallocate(void* p, std::size_t bytes) noexcept {
    if (!p) return;
    const std::size_t size = rounded(bytes);
    if (bytes < large_block || size > pool_cache_limit()) {
        std::free(p);
        return;
    }
    // A reused block may be up to a quarter larger than `bytes`: it is recorded at the
    // size asked for, which it holds at least.
    block_cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    while (!c.blocks.empty() && c.bytes + size > pool_cache_limit()) {  // oldest blocks go first
        std::free(c.blocks.front().p);
        c.bytes -= c.blocks.front().bytes;
        c.blocks.erase(c.blocks.begin());
    }
    try {
        c.blocks.push_back({p, size});
        c.bytes += size;
    } catch (const std::bad_alloc&) {
        std::free(p);
    }
}



}  // namespace attn::core
