#pragma once
// Aligned text columns for the listings of inspect and compare.
#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

namespace attn::cli {

/// `rows` (the first is the header) as columns two spaces apart: text left-aligned,
/// columns from `first_numeric` on right-aligned; the last column is not padded.
inline void print_columns(std::ostream& out, const std::vector<std::vector<std::string>>& rows, std::size_t first_numeric) {
    std::vector<std::size_t> width(rows.front().size(), 0);
    for (const auto& r : rows)
        for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
    for (const auto& r : rows) {
        std::string line;
        for (std::size_t i = 0; i < r.size(); ++i) {
            const std::size_t pad = width[i] - r[i].size();
            if (i) line += "  ";
            if (i >= first_numeric) line += std::string(pad, ' ') + r[i];
            else line += r[i] + (i + 1 < r.size() ? std::string(pad, ' ') : "");
        }
        out << line << '\n';
    }
}

}  // namespace attn::cli
