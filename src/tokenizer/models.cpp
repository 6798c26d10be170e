// The models of tokenizer.json as tokenizers' models/ runs them: bpe/, wordpiece/,
// wordlevel/, unigram/.
#include "models.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <queue>

#include <nlohmann/json.hpp>

#include "attn/error.hpp"

namespace attn::tokenizer::detail {

namespace {

void read_vocab(const json& v, std::unordered_map<std::string, std::uint32_t>& vocab, const std::string& where) {
    if (!v.is_object()) bad(where + ": 'vocab' is not an object");
    for (auto it = v.begin(); it != v.end(); ++it) {
        vocab[it.key()] = token_id(it.value(), where + ": vocab entry '" + it.key() + "'");
    }
}

struct bpe_model : model {
    std::unordered_map<std::uint64_t, std::pair<std::uint32_t, std::uint32_t>> merges;  // pair -> (rank, new id)
    std::optional<std::string> unk_token;
    std::string prefix, suffix;
    bool fuse_unk = false, byte_fallback = false, ignore_merges = false;

    static std::uint64_t key(std::uint32_t a, std::uint32_t b) { return (std::uint64_t(a) << 32) | b; }

    token_list tokenize(const std::string& w) const override {
        token_list out;
        if (w.empty()) return out;
        if (ignore_merges) {
            auto it = vocab.find(w);
            if (it != vocab.end()) return {{it->second, {0, w.size()}}};
        }
        struct symbol {
            std::uint32_t id;
            std::ptrdiff_t prev, next;
            std::size_t len;
        };
        std::vector<symbol> symbols;
        auto add = [&](std::uint32_t id, std::size_t len) {
            const auto n = static_cast<std::ptrdiff_t>(symbols.size());
            symbols.push_back({id, n - 1, n + 1, len});
        };
        bool has_unk = false;  // a pending unknown token (fused while fuse_unk)
        std::uint32_t unk_id = 0;
        std::size_t unk_len = 0;
        for (std::size_t i = 0; i < w.size();) {
            const auto n = detail::decode_at(w, i).second;
            std::string s = w.substr(i, n);
            const bool first = i == 0, last = i + n == w.size();
            i += n;
            if (!first) s = prefix + s;
            if (last) s += suffix;
            auto it = vocab.find(s);
            if (it != vocab.end()) {
                if (has_unk) {
                    add(unk_id, unk_len);
                    has_unk = false;
                }
                add(it->second, n);
                continue;
            }
            if (byte_fallback) {
                std::vector<std::uint32_t> ids;
                for (unsigned char b : s) {
                    char name[8];
                    std::snprintf(name, sizeof name, "<0x%02X>", b);
                    auto f = vocab.find(name);
                    if (f == vocab.end()) break;
                    ids.push_back(f->second);
                }
                if (ids.size() == s.size()) {
                    for (auto id : ids) add(id, 1);
                    continue;
                }
            }
            if (unk_token) {
                auto u = vocab.find(*unk_token);
                if (u == vocab.end()) throw value_error("tokenizer.json", "model BPE: unk_token '" + *unk_token + "' is not in the vocabulary");
                if (has_unk && fuse_unk) {
                    unk_len += n;
                } else {
                    if (has_unk) add(unk_id, unk_len);
                    has_unk = true;
                    unk_id = u->second;
                    unk_len = n;
                }
            }
        }
        if (has_unk) add(unk_id, unk_len);
        if (!symbols.empty()) symbols.back().next = -1;

        // tokenizers' Word::merge_all: lowest rank first, then leftmost.
        struct merge {
            std::size_t pos;
            std::uint32_t rank, new_id;
            bool operator<(const merge& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
        };
        std::priority_queue<merge> queue;
        for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
            auto m = merges.find(key(symbols[i].id, symbols[i + 1].id));
            if (m != merges.end()) queue.push({i, m->second.first, m->second.second});
        }
        while (!queue.empty()) {
            const auto top = queue.top();
            queue.pop();
            auto& cur = symbols[top.pos];
            if (cur.len == 0 || cur.next == -1) continue;
            const auto next_pos = static_cast<std::size_t>(cur.next);
            const auto right = symbols[next_pos];
            auto m = merges.find(key(cur.id, right.id));
            if (m == merges.end() || m->second.second != top.new_id) continue;
            cur.id = top.new_id;
            cur.len += right.len;
            cur.next = right.next;
            symbols[next_pos].len = 0;
            if (right.next > -1 && static_cast<std::size_t>(right.next) < symbols.size())
                symbols[static_cast<std::size_t>(right.next)].prev = static_cast<std::ptrdiff_t>(top.pos);
            if (cur.prev >= 0) {
                auto pm = merges.find(key(symbols[static_cast<std::size_t>(cur.prev)].id, cur.id));
                if (pm != merges.end()) queue.push({static_cast<std::size_t>(cur.prev), pm->second.first, pm->second.second});
            }
            if (cur.next >= 0 && static_cast<std::size_t>(cur.next) < symbols.size()) {
                auto nm = merges.find(key(cur.id, symbols[static_cast<std::size_t>(cur.next)].id));
                if (nm != merges.end()) queue.push({top.pos, nm->second.first, nm->second.second});
            }
        }
        std::size_t start = 0;
        for (const auto& s : symbols) {
            if (s.len == 0) continue;
            out.push_back({s.id, {start, start + s.len}});
            start += s.len;
        }
        return out;
    }
};

model_ptr make_bpe(const json& j) {
    auto m = std::make_unique<bpe_model>();
    read_vocab(field(j, "vocab", "model BPE"), m->vocab, "model BPE");
    m->unk_token = opt_str(j, "unk_token");
    m->prefix = opt_str(j, "continuing_subword_prefix").value_or("");
    m->suffix = opt_str(j, "end_of_word_suffix").value_or("");
    m->fuse_unk = bool_field(j, "fuse_unk", false);
    m->byte_fallback = bool_field(j, "byte_fallback", false);
    m->ignore_merges = bool_field(j, "ignore_merges", false);
    if (j.contains("dropout") && !j.at("dropout").is_null()) bad("model BPE: dropout is not supported (encodings would be random)");
    const auto& merges = field(j, "merges", "model BPE");
    if (!merges.is_array()) bad("model BPE: 'merges' is not an array");
    std::uint32_t rank = 0;
    for (const auto& e : merges) {
        std::string a, b;
        if (e.is_string()) {
            const auto s = e.get<std::string>();
            const auto sp = s.find(' ');
            if (sp == std::string::npos) bad("model BPE: merge '" + s + "' is not two tokens separated by a space");
            a = s.substr(0, sp);
            b = s.substr(sp + 1);
        } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
            a = e[0].get<std::string>();
            b = e[1].get<std::string>();
        } else {
            bad("model BPE: merge " + std::to_string(rank) + " is neither \"a b\" nor [a, b]");
        }
        auto ia = m->vocab.find(a), ib = m->vocab.find(b);
        if (ia == m->vocab.end()) bad("model BPE: merge token '" + a + "' is not in the vocabulary");
        if (ib == m->vocab.end()) bad("model BPE: merge token '" + b + "' is not in the vocabulary");
        std::string joined = a + (b.compare(0, m->prefix.size(), m->prefix) == 0 ? b.substr(m->prefix.size()) : b);
        auto in = m->vocab.find(joined);
        if (in == m->vocab.end()) bad("model BPE: merged token '" + joined + "' is not in the vocabulary");
        m->merges.emplace(bpe_model::key(ia->second, ib->second), std::make_pair(rank, in->second));
        ++rank;
    }
    return m;
}

struct word_piece_model : model {
    std::string unk_token, prefix;
    std::size_t max_chars = 100;
    token_list tokenize(const std::string& s) const override {
        auto unk = [&]() -> token_list {
            auto u = vocab.find(unk_token);
            if (u == vocab.end()) throw value_error("tokenizer.json", "model WordPiece: unk_token '" + unk_token + "' is not in the vocabulary");
            return {{u->second, {0, s.size()}}};
        };
        if (detail::to_code_points(s).size() > max_chars) return unk();
        token_list out;
        std::size_t start = 0;
        while (start < s.size()) {
            std::size_t end = s.size();
            bool found = false;
            while (start < end) {
                std::string sub = s.substr(start, end - start);
                if (start > 0) sub = prefix + sub;
                auto it = vocab.find(sub);
                if (it != vocab.end()) {
                    out.push_back({it->second, {start, end}});
                    found = true;
                    break;
                }
                // Back off by the last character of the candidate.
                std::size_t k = end - 1;
                while (k > start && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
                end = k;
            }
            if (!found) return unk();
            start = end;
        }
        return out;
    }
};

struct word_level_model : model {
    std::string unk_token;
    token_list tokenize(const std::string& s) const override {
        auto it = vocab.find(s);
        if (it == vocab.end()) it = vocab.find(unk_token);
        if (it == vocab.end()) throw value_error("tokenizer.json", "model WordLevel: unk_token '" + unk_token + "' is not in the vocabulary");
        return {{it->second, {0, s.size()}}};
    }
};

// tokenizers' models/unigram: the Viterbi best path (Unigram::encode_optimized) over every
// vocabulary piece (a byte trie), unknown characters at min score - 10, consecutive unknown
// pieces fused, then byte fallback for pieces not in the vocabulary.
struct unigram_model : model {
    std::vector<std::pair<std::string, double>> pieces;
    std::optional<std::uint32_t> unk_id;
    bool byte_fallback = false;
    double min_score = 0;
    struct node {
        std::map<unsigned char, std::size_t> next;
        std::optional<std::uint32_t> id;
    };
    std::vector<node> trie = std::vector<node>(1);

    token_list tokenize(const std::string& s) const override {
        token_list out;
        if (s.empty()) return out;
        struct best {
            std::uint32_t id = 0;
            double score = 0;
            std::optional<std::size_t> starts_at;
        };
        const double unk_score = min_score - 10.0;
        std::vector<best> ends_at(s.size() + 1);
        for (std::size_t start = 0; start < s.size();) {
            const double till_here = ends_at[start].score;
            const auto mblen = detail::decode_at(s, start).second;
            bool single = false;
            std::size_t at = 0;
            for (std::size_t k = start; k < s.size(); ++k) {
                auto it = trie[at].next.find(static_cast<unsigned char>(s[k]));
                if (it == trie[at].next.end()) break;
                at = it->second;
                if (!trie[at].id) continue;
                auto& target = ends_at[k + 1];
                const double candidate = pieces[*trie[at].id].second + till_here;
                if (!target.starts_at || candidate > target.score) {
                    target = {*trie[at].id, candidate, start};
                }
                if (k + 1 - start == mblen) single = true;
            }
            if (!single) {
                if (!unk_id) throw value_error("tokenizer.json", "model Unigram: a character is not in the vocabulary and there is no unk_id");
                auto& target = ends_at[start + mblen];
                const double candidate = unk_score + till_here;
                if (!target.starts_at || candidate > target.score) target = {*unk_id, candidate, start};
            }
            start += mblen;
        }
        std::vector<range> found;  // pieces, last first
        std::optional<range> fused;
        for (std::size_t end = s.size(); end > 0;) {
            const auto& n = ends_at[end];
            const auto start = *n.starts_at;
            if (unk_id && n.id == *unk_id) {
                fused = fused ? range{start, fused->second} : range{start, end};
            } else {
                if (fused) found.push_back(*fused);
                fused.reset();
                found.push_back({start, end});
            }
            end = start;
        }
        if (fused) found.push_back(*fused);
        std::reverse(found.begin(), found.end());
        for (const auto& r : found) {
            const auto piece = s.substr(r.first, r.second - r.first);
            auto it = vocab.find(piece);
            if (it != vocab.end()) {
                out.push_back({it->second, r});
                continue;
            }
            if (byte_fallback) {
                token_list bytes;
                for (unsigned char b : piece) {
                    char name[8];
                    std::snprintf(name, sizeof name, "<0x%02X>", b);
                    auto f = vocab.find(name);
                    if (f == vocab.end()) break;
                    bytes.push_back({f->second, r});
                }
                if (bytes.size() == piece.size()) {
                    out.insert(out.end(), bytes.begin(), bytes.end());
                    continue;
                }
            }
            if (!unk_id) throw value_error("tokenizer.json", "model Unigram: a piece is not in the vocabulary and there is no unk_id");
            out.push_back({*unk_id, r});
        }
        return out;
    }
};

model_ptr make_unigram(const json& j) {
    auto m = std::make_unique<unigram_model>();
    const auto& vocab = field(j, "vocab", "model Unigram");
    if (!vocab.is_array()) bad("model Unigram: 'vocab' is not an array");
    for (const auto& e : vocab) {
        if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
            bad("model Unigram: vocab entry " + std::to_string(m->pieces.size()) + " is not [piece, score]");
        const auto id = static_cast<std::uint32_t>(m->pieces.size());
        m->pieces.push_back({e[0].get<std::string>(), e[1].get<double>()});
        m->vocab.emplace(m->pieces.back().first, id);
        if (id == 0 || m->pieces.back().second < m->min_score) m->min_score = m->pieces.back().second;
        std::size_t at = 0;
        for (unsigned char c : m->pieces.back().first) {
            auto it = m->trie[at].next.find(c);
            if (it == m->trie[at].next.end()) {
                m->trie.emplace_back();
                it = m->trie[at].next.emplace(c, m->trie.size() - 1).first;
            }
            at = it->second;
        }
        if (at != 0 && !m->trie[at].id) m->trie[at].id = id;
    }
    if (j.contains("unk_id") && !j.at("unk_id").is_null()) {
        if (!j.at("unk_id").is_number_unsigned() || j.at("unk_id").get<std::size_t>() >= m->pieces.size())
            bad("model Unigram: unk_id is not an index into the vocabulary");
        m->unk_id = j.at("unk_id").get<std::uint32_t>();
        m->text_valued_id = m->unk_id;
    }
    m->byte_fallback = bool_field(j, "byte_fallback", false);
    return m;
}

}  // namespace

model_ptr make_model(const json& j) {
    if (!j.is_object()) bad("model is not an object");
    std::string type;
    if (j.contains("type") && j.at("type").is_string()) type = j.at("type").get<std::string>();
    else if (j.contains("merges")) type = "BPE";
    else if (j.contains("max_input_chars_per_word")) type = "WordPiece";
    else if (j.contains("unk_id")) type = "Unigram";
    if (type == "BPE") return make_bpe(j);
    if (type == "WordPiece") {
        auto m = std::make_unique<word_piece_model>();
        read_vocab(field(j, "vocab", "model WordPiece"), m->vocab, "model WordPiece");
        m->unk_token = opt_str(j, "unk_token").value_or("[UNK]");
        m->prefix = opt_str(j, "continuing_subword_prefix").value_or("##");
        if (j.contains("max_input_chars_per_word") && j.at("max_input_chars_per_word").is_number_unsigned())
            m->max_chars = j.at("max_input_chars_per_word").get<std::size_t>();
        return m;
    }
    if (type == "Unigram") return make_unigram(j);
    if (type == "WordLevel") {
        auto m = std::make_unique<word_level_model>();
        read_vocab(field(j, "vocab", "model WordLevel"), m->vocab, "model WordLevel");
        m->unk_token = opt_str(j, "unk_token").value_or("");
        return m;
    }
    unsupported("model", type.empty() ? std::string("(none)") : type);
}

}  // namespace attn::tokenizer::detail
