#include "attn/memory.hpp"

#include <algorithm>
#include <climits>

#include <malloc.h>
#include <unistd.h>

namespace attn {

std::size_t default_kept_memory() noexcept {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const std::size_t ram = pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page) : 0;
    return std::min<std::size_t>(ram / 8, std::size_t{2} << 30);
}

bool keep_freed_memory(std::size_t limit) noexcept {
    const int trim = static_cast<int>(std::min<std::size_t>(limit, INT_MAX));
    return mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, trim) == 1;
}

}  // namespace attn
