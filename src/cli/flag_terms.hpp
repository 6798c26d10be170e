#pragma once
// From the settings core names in its errors to the flags that set them. core knows
// nothing of the command line (docs/design.md §3): it names a setting by its own name
// between backquotes (`window`, `prefix_len`, `causal`); the command line says the flag.
// The mapping is the option table's `term` column (src/cli/option_table.cpp), which the
// tests compile too, so that they read core's messages as a user does.

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attn::cli {

/// Setting name (as core writes it between backquotes) → what the command line calls it:
/// every row of option_table() with a term, its flag or what it `says` ("--mask causal").
const std::vector<std::pair<std::string, std::string>>& setting_flags();

/// `what` (an error's what()) in the command line's terms: every `name` of
/// setting_flags() replaced by its flag ("`window`: …" → "--window: …"); a backquoted
/// word that is no setting is kept as is. Throws nothing but std::bad_alloc.
inline std::string in_flag_terms(std::string_view what) {
    const auto& table = setting_flags();
    std::string out;
    out.reserve(what.size());
    std::size_t i = 0;
    for (std::size_t open; (open = what.find('`', i)) != std::string_view::npos;) {
        const std::size_t close = what.find('`', open + 1);
        if (close == std::string_view::npos) break;
        const std::string_view name = what.substr(open + 1, close - open - 1);
        const auto it = std::find_if(table.begin(), table.end(), [&](const auto& e) { return e.first == name; });
        if (it == table.end()) {
            // Not a setting: kept, the search going on from its closing quote.
            out.append(what.substr(i, close - i));
            i = close;
            continue;
        }
        out.append(what.substr(i, open - i));
        out += it->second;
        i = close + 1;
    }
    out.append(what.substr(i));
    return out;
}

}  // namespace attn::cli
