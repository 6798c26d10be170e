#pragma once
// The lists of families a message names, read from the registry (model::families()), so
// that a new family file needs no edit of the tests that check those messages.
#include <string>
#include <vector>

#include "attn/model/registry.hpp"

namespace attn_test {

/// What an unknown model_type's refusal lists: every registered model_type, in the
/// registry's order ("gpt2, bert, llama, mistral, …, gpt_neox or phi3"), then where the
/// --arch names are (attn compute --help).
inline std::string known_families_expected() {
    std::vector<std::string> types;
    for (const attn::model::family_spec* f : attn::model::families())
        types.insert(types.end(), f->model_types.begin(), f->model_types.end());
    const auto list = [](const std::vector<std::string>& v) {
        std::string s;
        for (std::size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : i + 1 == v.size() ? " or " : ", ") + v[i];
        return s;
    };
    return list(types) + ", or --arch with a family attn compute --help lists";
}

}  // namespace attn_test
