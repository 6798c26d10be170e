// The tensor memory pool: large freed blocks are reused, small ones are not kept, the
// cache stays within its limit.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>

#include "attn/core/heads.hpp"
#include "attn/core/pool.hpp"

using namespace attn::core;

namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

bool aligned(const void* p, std::size_t a) { return reinterpret_cast<std::uintptr_t>(p) % a == 0; }

}  // namespace

TEST_CASE("a freed large block is reused by the next allocation of a similar size") {
    pool_release();
    REQUIRE(pool_cached_bytes() == 0);
    void* a = pool_allocate(8 * MiB);
    CHECK(aligned(a, 2 * MiB));
    pool_deallocate(a, 8 * MiB);
    CHECK(pool_cached_bytes() == 8 * MiB);
    void* b = pool_allocate(8 * MiB - 100);  // same size once rounded to 2 MiB
    CHECK(b == a);
    CHECK(pool_cached_bytes() == 0);
    pool_deallocate(b, 8 * MiB - 100);
    pool_release();
    CHECK(pool_cached_bytes() == 0);
}

TEST_CASE("a cached block is not handed out when too small or more than a quarter too large") {
    pool_release();
    void* a = pool_allocate(16 * MiB);
    pool_deallocate(a, 16 * MiB);
    void* small = pool_allocate(8 * MiB);  // 16 MiB would waste half
    CHECK(small != a);
    void* large = pool_allocate(18 * MiB);  // does not fit
    CHECK(large != a);
    void* close = pool_allocate(14 * MiB);  // wastes 2 of 16 MiB: reused
    CHECK(close == a);
    CHECK(pool_cached_bytes() == 0);
    for (auto [p, n] : {std::pair{small, 8 * MiB}, std::pair{large, 18 * MiB}, std::pair{close, 14 * MiB}})
        pool_deallocate(p, n);
    CHECK(pool_cached_bytes() == 40 * MiB);  // recorded at the sizes asked for
    pool_release();
}

TEST_CASE("small blocks go straight back to the system, malloc-aligned") {
    pool_release();
    void* p = pool_allocate(1000);
    CHECK(aligned(p, alignof(std::max_align_t)));
    pool_deallocate(p, 1000);
    CHECK(pool_cached_bytes() == 0);
}

TEST_CASE("the cache never holds more than its limit, the oldest blocks leave first") {
    pool_release();
    const std::size_t limit = pool_cache_limit();
    REQUIRE(limit >= 16 * MiB);
    const std::size_t block = limit / 2 + 2 * MiB;  // two do not fit together
    void* a = pool_allocate(block);
    void* b = pool_allocate(block);
    pool_deallocate(a, block);
    pool_deallocate(b, block);  // evicts a
    CHECK(pool_cached_bytes() <= limit);
    void* c = pool_allocate(block);
    CHECK(c == b);
    pool_deallocate(c, block);
    pool_release();
}

TEST_CASE("a tensor4 of the same shape reuses a freed tensor's memory") {
    pool_release();
    const void* first = nullptr;
    {
        auto t = tensor4<float>::from_shape({1, 8, 512, 512});  // 8 MiB
        first = t.data();
    }
    auto u = tensor4<float>::from_shape({1, 8, 512, 512});
    CHECK(static_cast<const void*>(u.data()) == first);
}
