#include "isa.hpp"

#include <cstdlib>
#include <string>
#include <type_traits>

#include "attn/core/attention.hpp"
#include "attn/error.hpp"

namespace attn::core::detail {

const char* isa_name(isa path) {
    switch (path) {
        case isa::avx2: return "avx2";
        case isa::avx512: return "avx512";
        default: return "generic";
    }
}

std::string missing_features(isa path) {
    __builtin_cpu_init();
    std::string missing;
    const auto need = [&](bool has, const char* name) {
        if (!has) missing += (missing.empty() ? "" : ", ") + std::string(name);
    };
    // The flags isa_avx2.cpp and isa_avx512.cpp are compiled with (CMakeLists.txt).
    // libgcc reports AVX and AVX-512 features only when the OS saves their registers.
    if (path == isa::avx2 || path == isa::avx512) {
        need(__builtin_cpu_supports("avx2"), "avx2");
        need(__builtin_cpu_supports("fma"), "fma");
    }
    if (path == isa::avx512) {
        need(__builtin_cpu_supports("avx512f"), "avx512f");
        need(__builtin_cpu_supports("avx512dq"), "avx512dq");
        need(__builtin_cpu_supports("avx512bw"), "avx512bw");
        need(__builtin_cpu_supports("avx512vl"), "avx512vl");
    }
    return missing;
}

namespace {

struct choice {
    isa path = isa::generic;
    std::string usage, missing;  // the error to throw, if any
};

choice decide() {
    choice c;
    const char* env = std::getenv("ATTN_ISA");
    const std::string want = env ? env : "";
    if (want.empty()) {
        c.path = missing_features(isa::avx512).empty() ? isa::avx512
                 : missing_features(isa::avx2).empty() ? isa::avx2
                                                       : isa::generic;
        return c;
    }
    if (want == "avx512")
        c.path = isa::avx512;
    else if (want == "avx2")
        c.path = isa::avx2;
    else if (want == "generic")
        c.path = isa::generic;
    else {
        c.usage = "unknown kernel path " + expected_got("avx2, avx512 or generic", "'" + want + "'");
        return c;
    }
    c.missing = missing_features(c.path);
    return c;
}

}  // namespace

isa selected_isa() {
    static const choice c = decide();
    if (!c.usage.empty()) throw usage_error("ATTN_ISA", c.usage);
    if (!c.missing.empty())
        throw value_error("ATTN_ISA", std::string("this CPU lacks ") + c.missing + ", which the " + isa_name(c.path) +
                                          " path needs");
    return c.path;
}

bool fused_stream() {
    static const std::string want = [] {
        const char* env = std::getenv("ATTN_STREAM");
        return std::string(env ? env : "");
    }();
    if (want.empty() || want == "fused") return true;
    if (want == "blas") return false;
    throw usage_error("ATTN_STREAM", "unknown streaming kernel " + expected_got("fused or blas", "'" + want + "'"));
}

namespace {

/// The row loops each path compiled for T.
template <class T>
const row_kernels<T>& compiled(isa path) {
    if constexpr (std::is_same_v<T, float>)
        return path == isa::avx512 ? avx512::row_kernels_float()
               : path == isa::avx2 ? avx2::row_kernels_float()
                                   : generic::row_kernels_float();
    else
        return path == isa::avx512 ? avx512::row_kernels_double()
               : path == isa::avx2 ? avx2::row_kernels_double()
                                   : generic::row_kernels_double();
}

/// The avx512 path's row loops with the fused kernel's tiles of the avx2 path
/// (rowops.hpp): the same bits on both paths by construction.
template <class T>
const row_kernels<T>& avx512_with_avx2_tiles() {
    static const row_kernels<T> k = [] {
        row_kernels<T> r = compiled<T>(isa::avx512);
        const row_kernels<T>& tiles = compiled<T>(isa::avx2);
        r.score_tile = tiles.score_tile;
        r.value_tile = tiles.value_tile;
        r.fused_exp_sum = tiles.fused_exp_sum;
        r.scale_store = tiles.scale_store;
        return r;
    }();
    return k;
}

}  // namespace

template <class T>
const row_kernels<T>& row_ops(isa path) {
    return path == isa::avx512 ? avx512_with_avx2_tiles<T>() : compiled<T>(path);
}

template const row_kernels<float>& row_ops(isa);
template const row_kernels<double>& row_ops(isa);

}  // namespace attn::core::detail

namespace attn::core {

const char* kernel_isa() { return detail::isa_name(detail::selected_isa()); }

}  // namespace attn::core
