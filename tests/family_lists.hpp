#pragma once
// The lists of families a message names, read from the registry (model::families()), so
// that a new family file needs no edit of the tests that check those messages.
#include <string>

#include "attn/model/registry.hpp"

namespace attn_test {

/// What an unknown model_type's refusal lists: every registered model_type, in the
/// registry's order ("gpt2, bert, llama, mistral, …, gpt_neox or phi3"), then
/// "or give --arch " and the --arch names joined by '|'.
inline std::string known_families_expected() {
    std::string types, archs;
    std::size_t n = 0, total = 0;
    for (const attn::model::family_spec* f : attn::model::families()) total += f->model_types.size();
    for (const attn::model::family_spec* f : attn::model::families()) {
        for (const std::string& t : f->model_types) types += (n++ == 0 ? "" : n == total ? " or " : ", ") + t;
        archs += (archs.empty() ? "" : "|") + f->name;
    }
    return types + ", or give --arch " + archs;
}

}  // namespace attn_test
