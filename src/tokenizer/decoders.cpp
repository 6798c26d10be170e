// The decoders of tokenizer.json as tokenizers' decoders/ runs them (byte_level.rs,
// byte_fallback.rs, fuse.rs, strip.rs, metaspace.rs, wordpiece.rs, bpe.rs, sequence.rs).
#include "decoders.hpp"

#include <cctype>
#include <functional>
#include <utility>

#include <nlohmann/json.hpp>

#include "detail.hpp"
#include "pre_tokenizers.hpp"

namespace attn::tokenizer::detail {

namespace {

// String::from_utf8_lossy: each maximal ill-formed subsequence becomes one U+FFFD.
std::string utf8_lossy(const std::string& b) {
    std::string out;
    std::size_t i = 0;
    while (i < b.size()) {
        const auto c0 = static_cast<unsigned char>(b[i]);
        std::size_t need = 0;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c0 < 0x80) { out += b[i++]; continue; }
        if (c0 >= 0xC2 && c0 <= 0xDF) need = 1;
        else if (c0 >= 0xE0 && c0 <= 0xEF) { need = 2; if (c0 == 0xE0) lo = 0xA0; if (c0 == 0xED) hi = 0x9F; }
        else if (c0 >= 0xF0 && c0 <= 0xF4) { need = 3; if (c0 == 0xF0) lo = 0x90; if (c0 == 0xF4) hi = 0x8F; }
        std::size_t k = 1;
        for (; k <= need && i + k < b.size(); ++k) {
            const auto c = static_cast<unsigned char>(b[i + k]);
            if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) break;
        }
        if (need > 0 && k == need + 1) {
            out.append(b, i, k);
        } else {
            out += "\xEF\xBF\xBD";
            if (k == 0) k = 1;
        }
        i += k;
    }
    return out;
}

struct fn_decoder : decoder {
    std::function<strings(strings)> f;
    explicit fn_decoder(std::function<strings(strings)> g) : f(std::move(g)) {}
    strings decode_chain(strings tokens) const override { return f(std::move(tokens)); }
};

struct sequence_decoder : decoder {
    std::vector<decoder_ptr> items;
    strings decode_chain(strings tokens) const override {
        for (const auto& d : items) tokens = d->decode_chain(std::move(tokens));
        return tokens;
    }
};

}  // namespace

decoder_ptr make_decoder(const json& j) {
    if (j.is_null()) return nullptr;
    const auto type = type_of(j, "decoder");
    auto fn = [](std::function<strings(strings)> f) { return std::make_unique<fn_decoder>(std::move(f)); };
    if (type == "Sequence") {
        auto s = std::make_unique<sequence_decoder>();
        const auto& items = field(j, "decoders", "decoder Sequence");
        if (!items.is_array()) bad("decoder Sequence: 'decoders' is not an array");
        for (const auto& i : items)
            if (auto d = make_decoder(i)) s->items.push_back(std::move(d));
        return s;
    }
    if (type == "ByteLevel") {
        return fn([](strings tokens) {
            // GPT-2's alphabet back to bytes: its characters are U+0021..U+0143, so a table
            // indexed by code point (built once; -1 = not in the alphabet).
            static const std::vector<int> byte_of = [] {
                std::vector<int> t(0x144, -1);
                const auto& table = bytes_char();
                for (int b = 0; b < 256; ++b) t[detail::decode_at(table[static_cast<std::size_t>(b)], 0).first] = b;
                return t;
            }();
            std::string bytes;
            for (const auto& t : tokens) {
                std::string mine;
                bool all = true;
                for (std::size_t i = 0; i < t.size();) {
                    const auto [c, n] = detail::decode_at(t, i);
                    i += n;
                    if (c >= byte_of.size() || byte_of[c] < 0) { all = false; break; }
                    mine += static_cast<char>(byte_of[c]);
                }
                bytes += all ? mine : t;
            }
            return strings{utf8_lossy(bytes)};
        });
    }
    if (type == "ByteFallback") {
        return fn([](strings tokens) {
            strings out;
            std::string pending;
            auto flush = [&] {
                if (pending.empty()) return;
                if (detail::invalid_utf8_at(pending) == std::string_view::npos) out.push_back(pending);
                else
                    for (std::size_t k = 0; k < pending.size(); ++k) out.push_back("\xEF\xBF\xBD");
                pending.clear();
            };
            for (auto& t : tokens) {
                if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && std::isxdigit(static_cast<unsigned char>(t[3])) &&
                    std::isxdigit(static_cast<unsigned char>(t[4]))) {
                    pending += static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16));
                } else {
                    flush();
                    out.push_back(std::move(t));
                }
            }
            flush();
            return out;
        });
    }
    if (type == "Fuse") {
        return fn([](strings tokens) {
            std::string all;
            for (const auto& t : tokens) all += t;
            return strings{all};
        });
    }
    if (type == "Strip") {
        const auto content = detail::to_code_points(str_field(j, "content", "decoder Strip"));
        if (content.size() != 1) bad("decoder Strip: content is not one character");
        const auto start = j.value("start", std::size_t(0)), stop = j.value("stop", std::size_t(0));
        const char32_t c = content[0];
        return fn([c, start, stop](strings tokens) {
            for (auto& t : tokens) {
                const auto cps = detail::to_code_points(t);
                std::size_t a = 0, b = cps.size();
                for (std::size_t i = 0; i < start && i < cps.size() && cps[i] == c; ++i) a = i + 1;
                for (std::size_t i = 0; i < stop && i < cps.size() && cps[cps.size() - 1 - i] == c; ++i) b = cps.size() - 1 - i;
                std::string r;
                for (std::size_t i = a; i < b; ++i) detail::append_utf8(r, cps[i]);
                t = r;
            }
            return tokens;
        });
    }
    if (type == "Replace") {
        auto p = make_pattern(field(j, "pattern", "decoder Replace"), "decoder Replace");
        const auto content = str_field(j, "content", "decoder Replace");
        return fn([p, content](strings tokens) {
            for (auto& t : tokens) {
                std::string r;
                for (const auto& [m, is_match] : p.find_matches(t)) r += is_match ? content : t.substr(m.first, m.second - m.first);
                t = r;
            }
            return tokens;
        });
    }
    if (type == "Metaspace") {
        const auto rep = detail::to_code_points(str_field(j, "replacement", "decoder Metaspace"));
        if (rep.size() != 1) bad("decoder Metaspace: replacement is not one character");
        const bool strip_first = metaspace_prepend_scheme(j) != "never";
        const char32_t r = rep[0];
        return fn([r, strip_first](strings tokens) {
            for (std::size_t i = 0; i < tokens.size(); ++i) {
                std::string out;
                for (char32_t c : detail::to_code_points(tokens[i])) {
                    if (c == r) {
                        if (!(i == 0 && strip_first)) out += ' ';
                    } else {
                        detail::append_utf8(out, c);
                    }
                }
                tokens[i] = out;
            }
            return tokens;
        });
    }
    if (type == "WordPiece") {
        const auto prefix = opt_str(j, "prefix").value_or("##");
        const bool cleanup = bool_field(j, "cleanup", true);
        return fn([prefix, cleanup](strings tokens) {
            for (std::size_t i = 0; i < tokens.size(); ++i) {
                auto& t = tokens[i];
                if (i != 0) {
                    if (t.compare(0, prefix.size(), prefix) == 0) t = t.substr(prefix.size());
                    else t = " " + t;
                }
                if (cleanup) {
                    static const std::pair<const char*, const char*> rules[] = {
                        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
                        {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
                    for (const auto& [from, to] : rules) {
                        std::string r;
                        const std::string f = from;
                        std::size_t pos = 0, hit;
                        while ((hit = t.find(f, pos)) != std::string::npos) {
                            r.append(t, pos, hit - pos);
                            r += to;
                            pos = hit + f.size();
                        }
                        r.append(t, pos, std::string::npos);
                        t = r;
                    }
                }
            }
            return tokens;
        });
    }
    if (type == "BPEDecoder") {
        const auto suffix = opt_str(j, "suffix").value_or("</w>");
        return fn([suffix](strings tokens) {
            for (std::size_t i = 0; i < tokens.size(); ++i) {
                const std::string rep = i + 1 == tokens.size() ? "" : " ";
                std::string r;
                std::size_t pos = 0, hit;
                while (!suffix.empty() && (hit = tokens[i].find(suffix, pos)) != std::string::npos) {
                    r.append(tokens[i], pos, hit - pos);
                    r += rep;
                    pos = hit + suffix.size();
                }
                r.append(tokens[i], pos, std::string::npos);
                tokens[i] = r;
            }
            return tokens;
        });
    }
    unsupported("decoder", type);
}

}  // namespace attn::tokenizer::detail
