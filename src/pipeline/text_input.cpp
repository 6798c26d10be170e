// Text in (docs/design.md §5.3): include/attn/pipeline/text.hpp.
#include "attn/pipeline/text.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <limits>
#include <unordered_map>

#include "attn/error.hpp"
#include "attn/io/limits.hpp"
#include "attn/io/input.hpp"
#include "attn/io/json.hpp"
#include "attn/stages.hpp"

namespace attn {

tokenizer::tokenizer load_tokenizer(const std::string& path) {
    std::error_code ec;
    // A directory means the tokenizer.json it holds (a checkpoint's own).
    const std::string file = std::filesystem::is_directory(path, ec) ? (std::filesystem::path(path) / "tokenizer.json").string() : path;
    return tokenizer::from_text(io::read_side_json(file, io::side_json::tokenizer), file);
}

std::vector<std::string> read_texts(const std::string& path, std::size_t max_bytes) {
    const std::string s = io::read_file_at_most(path, max_bytes, "text file too large for --max-bytes");
    // Named by its byte in the file (and line), not in the line: the file is what to fix.
    if (const auto bad = tokenizer::invalid_utf8_at(s); bad != std::string::npos) {
        const auto line = 1 + static_cast<std::size_t>(std::count(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(bad), '\n'));
        throw value_error(path, "invalid UTF-8 at byte " + std::to_string(bad) + " (line " + std::to_string(line) + ")");
    }
    if (s.empty()) throw value_error(path, "holds no text " + expected_got("one text per line", "an empty file"));
    std::vector<std::string> lines;
    std::size_t start = 0;
    while (start < s.size()) {
        const auto end = s.find('\n', start);
        if (end == std::string::npos) {
            lines.push_back(s.substr(start));
            break;
        }
        lines.push_back(s.substr(start, end - start));
        start = end + 1;
    }
    return lines;
}

void check_text_encoding_bytes(const std::vector<std::string>& texts) {
    std::size_t bytes = 0;
    for (const auto& t : texts) bytes += t.size();
    const double needs = static_cast<double>(bytes) * static_cast<double>(text_encoding_bytes_per_byte);
    const std::size_t max = io::max_array_bytes();
    if (needs > static_cast<double>(max))
        throw limit_error("text", std::to_string(bytes) + " bytes of text need about " + io::approximate_bytes(needs) +
                                      " to encode (" + std::to_string(text_encoding_bytes_per_byte) + " per byte) " +
                                      "(expected at most --max-bytes " + io::limit_text(max) +
                                      "; raise --max-bytes or give a shorter text)");
}

encoded_texts encode_texts(const tokenizer::tokenizer& tok, const std::vector<std::string>& texts, bool add_special_tokens,
                           std::int64_t pad_id) {
    if (texts.empty()) throw usage_error("text", "nothing to encode " + expected_got("at least one text", "none"));
    check_text_encoding_bytes(texts);
    // One text at a time: its encoding is reduced to what a run keeps (ids, labels, word
    // ids and words) and dropped before the next is encoded, as attn tokenize writes each.
    encoded_texts out;
    std::vector<std::vector<std::int64_t>> text_ids;
    text_ids.reserve(texts.size());
    std::unordered_map<std::uint32_t, std::string> label_of;  // the decoder once per distinct id
    auto label = [&](std::uint32_t id) -> const std::string& {
        auto it = label_of.find(id);
        if (it == label_of.end()) it = label_of.emplace(id, tok.token_label(id)).first;
        return it->second;
    };
    std::size_t T = 0;
    for (std::size_t b = 0; b < texts.size(); ++b) {
        std::vector<std::int64_t> ids;
        std::vector<std::string> labels;
        std::vector<std::optional<std::uint32_t>> words;
        std::vector<std::pair<std::size_t, std::size_t>> bytes;
        {
            tokenizer::encoding e = tok.encode(texts[b], add_special_tokens);
            if (e.ids.empty())
                throw usage_error("text", "encodes to no tokens " +
                                              expected_got("a text with at least one token", texts.size() == 1 ? "\"\"" : "text " + std::to_string(b + 1) + " of " + std::to_string(texts.size())));
            const std::size_t n = e.ids.size();
            ids.assign(e.ids.begin(), e.ids.end());
            labels.reserve(n);
            words.resize(n);
            for (std::size_t t = 0; t < n; ++t) {
                labels.push_back(label(e.ids[t]));
                words[t] = e.special_tokens_mask[t] ? std::nullopt : e.word_ids[t];
            }
            bytes = std::move(e.byte_offsets);
        }
        const std::size_t n = ids.size();
        T = std::max(T, n);
        out.lengths.push_back(n);
        // The words' labels: the text over their tokens' bytes, or the token's own label.
        core::word_groups g = core::group_words(words);
        std::vector<std::string> word_labels(g.first_token.size());
        std::vector<std::size_t> from(g.first_token.size(), std::numeric_limits<std::size_t>::max()), to(g.first_token.size(), 0);
        for (std::size_t t = 0; t < n; ++t) {
            const std::size_t w = g.word_of_token[t];
            from[w] = std::min(from[w], bytes[t].first);
            to[w] = std::max(to[w], bytes[t].second);
        }
        for (std::size_t w = 0; w < word_labels.size(); ++w)
            word_labels[w] = words[g.first_token[w]] && from[w] < to[w] ? texts[b].substr(from[w], to[w] - from[w])
                                                                         : labels[g.first_token[w]];
        out.words.push_back(std::move(word_labels));
        out.word_groups.push_back(std::move(g));
        out.labels.push_back(std::move(labels));
        out.word_ids.push_back(std::move(words));
        text_ids.push_back(std::move(ids));
    }
    // Right-padded to the longest: labels "" and no word for padding.
    const std::size_t B = texts.size();
    std::vector<std::int64_t> ids(B * T, pad_id), mask(B * T, 0);
    bool padded = false;
    for (std::size_t b = 0; b < B; ++b) {
        const std::size_t n = text_ids[b].size();
        padded = padded || n != T;
        std::copy(text_ids[b].begin(), text_ids[b].end(), ids.begin() + static_cast<std::ptrdiff_t>(b * T));
        std::fill_n(mask.begin() + static_cast<std::ptrdiff_t>(b * T), n, 1);
        out.labels[b].resize(T);
        out.word_ids[b].resize(T);
        std::vector<std::int64_t>().swap(text_ids[b]);
    }
    const shape_t shape = B == 1 ? shape_t{T} : shape_t{B, T};
    out.token_ids = int64_array(shape, ids);
    if (padded) out.attention_mask = int64_array(shape, mask);
    return out;
}

array word_weights_of(const array& weights, bool layered, bool batched, const encoded_texts& text) {
    const shape_t& s = weights.shape;
    const std::size_t B = text.lengths.size();
    const std::size_t lead = (layered ? 1 : 0) + (batched ? 1 : 0);
    if (s.size() < 2 + lead || s[s.size() - 1] != s[s.size() - 2] || (batched && s[layered ? 1 : 0] != B) || (!batched && B != 1))
        throw shape_error(stage_name(stage::word_weights), "weights do not fit the texts " +
                                              expected_got(std::string(layered ? "(L, " : "(") + (batched ? std::to_string(B) + ", " : "") + "…, T, T)",
                                                           shape_string(s)));
    const std::size_t T = s.back();
    const std::vector<core::word_groups>& groups = text.word_groups;
    std::size_t W = 0;
    for (std::size_t b = 0; b < B; ++b) {
        if (text.lengths[b] > T)
            throw shape_error(stage_name(stage::word_weights), "weights do not fit the texts " + expected_got("T ≥ " + std::to_string(text.lengths[b]), shape_string(s)));
        W = std::max(W, groups[b].first_token.size());
    }
    // Blocks in C order; block i belongs to text (i / inner) % B, inner the blocks after B.
    std::size_t blocks = 1, inner = 1;
    for (std::size_t d = 0; d + 2 < s.size(); ++d) {
        blocks *= s[d];
        if (batched && d > (layered ? 1u : 0u)) inner *= s[d];
    }
    const std::vector<double> w = weights.to_vector<double>();
    std::vector<double> out(blocks * W * W, 0.0);
    std::vector<double> block;
    for (std::size_t i = 0; i < blocks; ++i) {
        const std::size_t b = batched ? (i / inner) % B : 0, n = text.lengths[b];
        block.assign(n * n, 0.0);  // the text's own n × n tokens, without padding
        for (std::size_t q = 0; q < n; ++q)
            std::copy_n(w.begin() + static_cast<std::ptrdiff_t>((i * T + q) * T), n, block.begin() + static_cast<std::ptrdiff_t>(q * n));
        const std::vector<double> merged = core::word_weights(block.data(), 1, n, n, groups[b], groups[b]);
        const std::size_t wn = groups[b].first_token.size();
        for (std::size_t q = 0; q < wn; ++q)
            std::copy_n(merged.begin() + static_cast<std::ptrdiff_t>(q * wn), wn, out.begin() + static_cast<std::ptrdiff_t>((i * W + q) * W));
    }
    shape_t shape(s.begin(), s.end() - 2);
    shape.push_back(W);
    shape.push_back(W);
    return array::from<double>(shape, out.data());
}

std::vector<std::string> token_labels(const tokenizer::tokenizer& tok, const std::vector<std::int64_t>& ids) {
    std::vector<std::string> labels;
    labels.reserve(ids.size());
    for (std::int64_t id : ids) {
        const bool known = id >= 0 && id <= std::numeric_limits<std::uint32_t>::max() && tok.id_to_token(static_cast<std::uint32_t>(id));
        labels.push_back(known ? tok.token_label(static_cast<std::uint32_t>(id)) : std::to_string(id));
    }
    return labels;
}

}  // namespace attn
