// The process memory policy (attn/memory.hpp): with keep_freed_memory(), a freed large
// tensor's pages are reused by the next one of its size instead of being faulted afresh.
#include <doctest/doctest.h>

#include <sys/resource.h>

#include "attn/core/heads.hpp"
#include "attn/memory.hpp"
#include "skip.hpp"

namespace {

long minor_faults() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

/// Minor page faults taken while allocating and filling a 32 MiB float32 tensor.
long faults_for_a_fresh_tensor() {
    const long before = minor_faults();
    auto t = attn::core::tensor4<float>::from_shape({1, 8, 1024, 1024});
    t.fill(1.0f);
    return minor_faults() - before;
}

}  // namespace

TEST_CASE("with keep_freed_memory a freed 32 MiB tensor is reused: the next one takes no page faults") {
    if (!attn::keep_freed_memory()) {
        ATTN_SKIP("the C library refused mallopt (a sanitizer's allocator)");
    }
    faults_for_a_fresh_tensor();  // the heap grows once, here
    // Without the policy every tensor is a fresh mapping: 8192 faults of 4 KiB pages.
    CHECK(faults_for_a_fresh_tensor() < 64);
}

TEST_CASE("the default amount kept is an eighth of memory, at most 2 GiB") {
    CHECK(attn::default_kept_memory() > 0);
    CHECK(attn::default_kept_memory() <= (std::size_t{2} << 30));
}
