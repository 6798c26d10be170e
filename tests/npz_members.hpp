#pragma once
// Looking up the arrays of an .npz (or any list of named arrays) in tests: one lookup for
// every test file that compares members against a reference.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "cli_util.hpp"

namespace attn_test {

/// The array called `name` in `arrays`, or nullptr when there is none.
inline const attn::array* find_array(const std::vector<attn::named_array>& arrays, const std::string& name) {
    for (const auto& a : arrays)
        if (a.name == name) return &a.value;
    return nullptr;
}

/// The array called `name` in `arrays`; a failed test naming it when there is none.
inline const attn::array& member(const std::vector<attn::named_array>& arrays, const std::string& name) {
    if (const attn::array* a = find_array(arrays, name)) return *a;
    FAIL("no array " << name);
    throw std::logic_error("unreachable");
}

/// Entry `i` of `a`'s leading axis (a layer of a --layer all stage), as its own array.
inline attn::array leading_slice(const attn::array& a, std::size_t i) {
    attn::array s;
    s.type = a.type;
    s.shape.assign(a.shape.begin() + 1, a.shape.end());
    const std::size_t n = a.data.size() / a.shape[0];
    s.data.assign(a.data.begin() + static_cast<std::ptrdiff_t>(i * n), a.data.begin() + static_cast<std::ptrdiff_t>((i + 1) * n));
    return s;
}

/// The arrays of the .npz file at `path`.
inline std::vector<attn::named_array> read_npz_file(const std::string& path) {
    return attn::io::read_npz(slurp(path), path);
}

/// Writes `count` token ids (i·37 + 5) mod 64, int64, to an .npy at `path`: a long
/// sequence for the tiny checkpoints (vocab 64) whose peak memory a test measures.
inline void write_cycled_ids(const std::string& path, std::size_t count) {
    attn::array a;
    a.type = attn::dtype::i8;
    a.shape = {count};
    a.data.resize(count * sizeof(std::int64_t));
    for (std::size_t i = 0; i < count; ++i) {
        const auto id = static_cast<std::int64_t>((i * 37 + 5) % 64);
        std::memcpy(a.data.data() + i * sizeof id, &id, sizeof id);
    }
    std::ofstream f(path, std::ios::binary);
    attn::io::write_npy(f, a);
}

}  // namespace attn_test
