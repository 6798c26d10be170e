// The readers' size limit (include/attn/io/limits.hpp).

#include "attn/io/limits.hpp"

#include <cstdio>
#include <iterator>
#include <string>

#include <unistd.h>

#include <atomic>
#include <limits>

#include "attn/error.hpp"

namespace attn::io {

namespace {

std::atomic<std::size_t>& limit() {
    static std::atomic<std::size_t> value{default_max_array_bytes()};
    return value;
}

}  // namespace

std::size_t default_max_array_bytes() {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page_size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page_size <= 0) return std::numeric_limits<std::size_t>::max();
    std::size_t total = 0;
    if (__builtin_mul_overflow(static_cast<std::size_t>(pages), static_cast<std::size_t>(page_size), &total))
        return std::numeric_limits<std::size_t>::max();
    return total / 4;
}

std::size_t max_array_bytes() { return limit().load(std::memory_order_relaxed); }

void set_max_array_bytes(std::size_t bytes) { limit().store(bytes, std::memory_order_relaxed); }

void check_array_bytes(std::size_t bytes, const std::string& source) {
    const std::size_t max = max_array_bytes();
    if (bytes > max)
        throw limit_error(source, "array too large for --max-bytes " +
                                      expected_got("at most " + std::to_string(max) + " bytes", std::to_string(bytes)));
}

void check_file_bytes(std::size_t bytes, const std::string& source) {
    const std::size_t max = max_array_bytes();
    if (bytes > max)
        throw limit_error(source, "arrays too large for --max-bytes together " +
                                      expected_got("at most " + std::to_string(max) + " bytes from one file",
                                                   std::to_string(bytes)));
}

std::string approximate_bytes(double bytes) {
    const char* units[] = {"bytes", "kB", "MB", "GB", "TB", "PB", "EB"};
    std::size_t u = 0;
    while (bytes >= 1000 && u + 1 < std::size(units)) bytes /= 1000, ++u;
    char text[64];
    std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
    return text;
}

std::string limit_text(std::size_t bytes) {
    const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    std::size_t u = 0;
    while (bytes >= 1024 && bytes % 1024 == 0 && u + 1 < std::size(units)) bytes /= 1024, ++u;
    return std::to_string(bytes) + " " + units[u];
}

}  // namespace attn::io
