#include "attn/io/number_format.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>

#include <dragonbox/dragonbox.h>

namespace attn::io {

namespace {

constexpr char two_digits[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

int digit_count(std::uint64_t v) {
    int n = 1;
    while (v >= 10000) v /= 10000, n += 4;
    return v >= 1000 ? n + 3 : v >= 100 ? n + 2 : v >= 10 ? n + 1 : n;
}

/// Writes the n decimal digits of v (n = digit_count(v), or more for leading zeros)
/// ending at out + n. Pairs of digits from a table; the 8-digit halves of a 64-bit
/// value are written independently so that the division chains overlap.
void put_digits(char* out, std::uint64_t v, int n) {
    char* p = out + n;
    auto put32 = [](char* end, std::uint32_t x, char* stop) {
        while (end - stop >= 2) {
            end -= 2;
            std::memcpy(end, two_digits + 2 * (x % 100), 2);
            x /= 100;
        }
        if (end > stop) *--end = static_cast<char>('0' + x % 10);
    };
    for (; n > 8; n -= 8, p -= 8, v /= 100000000) put32(p, static_cast<std::uint32_t>(v % 100000000), p - 8);
    put32(p, static_cast<std::uint32_t>(v), p - n);
}

/// An integral |v| < 2^127 in full: std::to_chars prints the exact value, not the
/// shortest digits padded with zeros, when it chooses fixed notation for such a value.
char* put_exact_integer(char* o, unsigned __int128 x) {
    char tmp[40];
    char* p = tmp + sizeof tmp;
    do {
        *--p = static_cast<char>('0' + static_cast<int>(x % 10));
        x /= 10;
    } while (x);
    const auto n = static_cast<std::size_t>(tmp + sizeof tmp - p);
    std::memcpy(o, p, n);
    return o + n;
}

template <class T>
int shortest_impl(char* out, T v) {
    char* o = out;
    if (std::signbit(v)) *o++ = '-';
    if (v == 0) {
        *o++ = '0';
        return static_cast<int>(o - out);
    }
    const auto d = jkj::dragonbox::to_decimal(v, jkj::dragonbox::policy::sign::ignore);
    const int n = digit_count(d.significand), e = d.exponent;  // |v| ≈ significand · 10^e
    const int sci_exp = e + n - 1;
    const int abs_exp = sci_exp < 0 ? -sci_exp : sci_exp;
    // std::to_chars without a format: the shorter of %f-like and %e-like text, ties to
    // fixed. Scientific: d[.ddd]e±XX with at least two exponent digits.
    const int sci_len = n + (n > 1 ? 1 : 0) + 2 + (abs_exp >= 100 ? 3 : 2);
    const int fixed_len = e >= 0 ? n + e : n + e > 0 ? n + 1 : 2 - e;
    if (fixed_len <= sci_len) {
        if (e > 0) return static_cast<int>(put_exact_integer(o, static_cast<unsigned __int128>(std::fabs(v))) - out);
        if (e == 0) {
            put_digits(o, d.significand, n);
            return static_cast<int>(o + n - out);
        }
        if (n + e > 0) {  // ddd.ddd
            char digits[20];
            put_digits(digits, d.significand, n);
            std::memcpy(o, digits, static_cast<std::size_t>(n + e));
            o += n + e;
            *o++ = '.';
            std::memcpy(o, digits + n + e, static_cast<std::size_t>(-e));
            return static_cast<int>(o - e - out);
        }
        *o++ = '0';  // 0.000ddd
        *o++ = '.';
        std::memset(o, '0', static_cast<std::size_t>(-(n + e)));
        o += -(n + e);
        put_digits(o, d.significand, n);
        return static_cast<int>(o + n - out);
    }
    char digits[20];
    put_digits(digits, d.significand, n);
    *o++ = digits[0];
    if (n > 1) {
        *o++ = '.';
        std::memcpy(o, digits + 1, static_cast<std::size_t>(n - 1));
        o += n - 1;
    }
    *o++ = 'e';
    *o++ = sci_exp < 0 ? '-' : '+';
    if (abs_exp >= 100) *o++ = static_cast<char>('0' + abs_exp / 100);
    std::memcpy(o, two_digits + 2 * (abs_exp % 100), 2);
    return static_cast<int>(o + 2 - out);
}

}  // namespace

int format_shortest(char* out, float v) { return shortest_impl(out, v); }
int format_shortest(char* out, double v) { return shortest_impl(out, v); }

}  // namespace attn::io
