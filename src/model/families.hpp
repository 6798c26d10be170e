#pragma once
// The three families behind model::family (include/attn/model/family.hpp), one file
// each: gpt2.cpp, bert.cpp, llama.cpp. Internal to src/model/.
#include <string>
#include <vector>

#include "attn/model/family.hpp"

namespace attn::model {

/// A tensor as a compute matrix / vector of T (copied and converted).
template <class T>
core::tensor2<T> matrix_of(const array& a, const std::string& name);
template <class T>
core::tensor1<T> vector_of(const array& a, const std::string& name);

/// y = x·Wᵀ + b (out_in) or x·W + b (in_out), with the weight and optional bias loaded
/// from the family by local name.
template <class T>
core::tensor3<T> project(const family& f, const core::tensor3<T>& x, const std::string& weight, const std::string& bias,
                         core::weight_layout layout);

/// The named tensor's rows picked by ids, as (B, T, E) of T.
template <class T>
core::tensor3<T> lookup(const family& f, const std::string& table, const array& ids);

#define ATTN_FAMILY(ns)                                                                                         \
    namespace ns {                                                                                              \
    /* The name that tells whether a prefix is the checkpoint's, and the prefixes to try. */                 \
    extern const char* const probe;                                                                          \
    extern const std::vector<std::string> prefixes;                                                          \
    void check(const family& f);                                                                             \
    template <class T>                                                                                       \
    core::tensor3<T> embed(const family& f, const array& ids);                                               \
    template <class T>                                                                                       \
    core::tensor3<T> attention_norm(const family& f, std::size_t layer, const core::tensor3<T>& x);          \
    layer_attention attention(const family& f, std::size_t layer);                                           \
    template <class T>                                                                                       \
    core::tensor3<T> finish_block(const family& f, std::size_t layer, const core::tensor3<T>& x,             \
                                  const core::tensor3<T>& a);                                                \
    }

ATTN_FAMILY(gpt2)
ATTN_FAMILY(bert)
ATTN_FAMILY(llama)
#undef ATTN_FAMILY

/// The explicit instantiations each family file ends with, inside its namespace.
#define ATTN_FAMILY_INSTANTIATE(T)                                                                            \
    template core::tensor3<T> embed<T>(const family&, const array&);                                         \
    template core::tensor3<T> attention_norm<T>(const family&, std::size_t, const core::tensor3<T>&);        \
    template core::tensor3<T> finish_block<T>(const family&, std::size_t, const core::tensor3<T>&,           \
                                              const core::tensor3<T>&);

/// "h.3." style layer prefixes.
inline std::string layer_key(const char* stem, std::size_t layer, const std::string& rest) {
    return std::string(stem) + std::to_string(layer) + "." + rest;
}

}  // namespace attn::model
