// The added tokens (tokenizers' tokenizer/added_vocabulary.rs): leftmost-longest matching and
// the text cut at the matches.
#include "added_tokens.hpp"

#include <algorithm>

#include "models.hpp"

namespace attn::tokenizer::detail {

void matcher::add(const std::string& pattern, std::size_t token) {
    if (pattern.empty()) return;
    std::size_t at = 0;
    for (unsigned char c : pattern) {
        auto it = nodes[at].next.find(c);
        if (it == nodes[at].next.end()) {
            nodes.emplace_back();
            it = nodes[at].next.emplace(c, nodes.size() - 1).first;
        }
        at = it->second;
    }
    if (!nodes[at].token) nodes[at].token = token;
}

std::vector<std::tuple<std::size_t, std::size_t, std::size_t>> matcher::find_all(std::string_view s) const {
    std::vector<std::tuple<std::size_t, std::size_t, std::size_t>> out;
    if (nodes[0].next.empty()) return out;
    for (std::size_t i = 0; i < s.size();) {
        std::size_t at = 0, best_end = 0, best = 0;
        bool hit = false;
        for (std::size_t k = i; k < s.size(); ++k) {
            auto it = nodes[at].next.find(static_cast<unsigned char>(s[k]));
            if (it == nodes[at].next.end()) break;
            at = it->second;
            if (nodes[at].token) {
                hit = true;
                best_end = k + 1;
                best = *nodes[at].token;
            }
        }
        if (hit) {
            out.emplace_back(i, best_end, best);
            i = best_end;
        } else {
            ++i;
        }
    }
    return out;
}

namespace {

bool first_is_word(std::string_view s) { return !s.empty() && detail::is_word_char(detail::decode_at(s, 0).first); }
bool last_is_word(std::string_view s) {
    if (s.empty()) return false;
    std::size_t k = s.size() - 1;
    while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
    return detail::is_word_char(detail::decode_at(s, k).first);
}

}  // namespace

// tokenizers' AddedVocabulary::find_matches, then split_with_indices.
std::vector<split> split_added(const normalized& n, const matcher& m, const std::vector<added_token>& added) {
    std::vector<std::pair<std::optional<std::uint32_t>, range>> splits;
    const std::string_view s = n.text;
    std::size_t start_offset = 0;
    for (auto [start, stop, index] : m.find_all(s)) {
        const auto& t = added[index];
        if (t.single_word) {
            const bool start_space = start == 0 || !last_is_word(s.substr(0, start));
            const bool stop_space = stop == s.size() || !first_is_word(s.substr(stop));
            if (!start_space || !stop_space) continue;
        }
        if (t.lstrip) {
            std::size_t k = start;
            while (k > start_offset) {
                std::size_t p = k - 1;
                while (p > 0 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
                if (!detail::is_whitespace(detail::decode_at(s, p).first)) break;
                k = p;
            }
            start = std::max(k, start_offset);
        }
        if (t.rstrip) {
            while (stop < s.size()) {
                auto [c, len] = detail::decode_at(s, stop);
                if (!detail::is_whitespace(c)) break;
                stop += len;
            }
        }
        if (start_offset < start) splits.push_back({std::nullopt, {start_offset, start}});
        splits.push_back({t.id, {start, stop}});
        start_offset = stop;
    }
    if (start_offset != s.size() || splits.empty()) splits.push_back({std::nullopt, {start_offset, s.size()}});
    std::vector<split> out;
    for (auto& [id, r] : splits) {
        split sp{n.slice(r), std::nullopt};
        if (id) sp.tokens = token_list{{*id, {0, sp.n.text.size()}}};
        out.push_back(std::move(sp));
    }
    return out;
}

}  // namespace attn::tokenizer::detail
