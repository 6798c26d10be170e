// The normalized string, Unicode helpers (utf8proc) and Oniguruma patterns behind the
// tokenizer; each function mirrors the `tokenizers` function named in its comment.
#include "detail.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>

#include <oniguruma.h>
#include <utf8proc.h>

#include "attn/error.hpp"

namespace attn::tokenizer::detail {

// ---- Unicode ------------------------------------------------------------------------

std::pair<char32_t, std::size_t> decode_at(std::string_view s, std::size_t i) {
    utf8proc_int32_t c = 0;
    const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                    static_cast<utf8proc_ssize_t>(s.size() - i), &c);
    if (n <= 0) return {0xFFFD, 1};
    return {static_cast<char32_t>(c), static_cast<std::size_t>(n)};
}

void append_utf8(std::string& out, char32_t c) {
    utf8proc_uint8_t buf[4];
    const auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(c), buf);
    out.append(reinterpret_cast<const char*>(buf), static_cast<std::size_t>(n));
}

std::size_t invalid_utf8_at(std::string_view s) {
    std::size_t i = 0;
    while (i < s.size()) {
        utf8proc_int32_t c = 0;
        const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                        static_cast<utf8proc_ssize_t>(s.size() - i), &c);
        if (n <= 0) return i;
        i += static_cast<std::size_t>(n);
    }
    return std::string_view::npos;
}

std::vector<char32_t> to_code_points(std::string_view s) {
    std::vector<char32_t> out;
    for (std::size_t i = 0; i < s.size();) {
        auto [c, n] = decode_at(s, i);
        out.push_back(c);
        i += n;
    }
    return out;
}

static utf8proc_category_t category(char32_t c) {
    return static_cast<utf8proc_category_t>(utf8proc_category(static_cast<utf8proc_int32_t>(c)));
}

bool is_whitespace(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

bool is_word_char(char32_t c) {
    switch (category(c)) {
        case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
        case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
        case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
        case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO: case UTF8PROC_CATEGORY_PC:
            return true;
        default:
            return c == 0x200C || c == 0x200D;
    }
}

bool is_punctuation(char32_t c) {
    switch (category(c)) {
        case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS:
        case UTF8PROC_CATEGORY_PE: case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
        case UTF8PROC_CATEGORY_PO:
            return true;
        default:
            return false;
    }
}

bool is_numeric(char32_t c) {
    const auto k = category(c);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

bool is_other(char32_t c) {
    // Not Cn: tokenizers' unicode_categories builds its tables from UnicodeData.txt, which
    // lists no unassigned code point, so an unassigned one (U+0E00, U+FDD0) is never "other".
    const auto k = category(c);
    return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CO ||
           k == UTF8PROC_CATEGORY_CS;
}

bool is_mark_nonspacing(char32_t c) { return category(c) == UTF8PROC_CATEGORY_MN; }

void to_lowercase(char32_t c, std::vector<char32_t>& out) {
    if (c == 0x130) {  // the one unconditional multi-character lowercase mapping
        out.push_back(0x69);
        out.push_back(0x307);
        return;
    }
    out.push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
}

std::vector<range> graphemes(std::string_view s) {
    std::vector<range> out;
    utf8proc_int32_t state = 0;
    char32_t prev = 0;
    std::size_t start = 0;
    for (std::size_t i = 0; i < s.size();) {
        const auto [c, n] = decode_at(s, i);
        if (i > 0 && utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(prev), static_cast<utf8proc_int32_t>(c), &state)) {
            out.push_back({start, i});
            start = i;
        }
        prev = c;
        i += n;
    }
    if (start < s.size()) out.push_back({start, s.size()});
    return out;
}

// ---- Oniguruma ------------------------------------------------------------------------

static void onig_init_once() {
    static std::once_flag once;
    std::call_once(once, [] {
        OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
        onig_initialize(encodings, 1);
    });
}

regex::regex(const std::string& pattern_text, const std::string& what) {
    onig_init_once();
    regex_t* reg = nullptr;
    OnigErrorInfo info;
    const auto* p = reinterpret_cast<const OnigUChar*>(pattern_text.data());
    const int r = onig_new(&reg, p, p + pattern_text.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                           ONIG_SYNTAX_DEFAULT, &info);
    if (r != ONIG_NORMAL) {
        OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
        onig_error_code_to_str(message, r, &info);
        throw format_error("tokenizer.json", what + ": Oniguruma cannot compile pattern '" + pattern_text +
                                                 "': " + reinterpret_cast<const char*>(message));
    }
    reg_ = reg;
}

regex::~regex() { onig_free(static_cast<regex_t*>(reg_)); }

std::vector<range> regex::find_all(std::string_view s) const {
    std::vector<range> out;
    auto* reg = static_cast<regex_t*>(reg_);
    std::unique_ptr<OnigRegion, void (*)(OnigRegion*)> region(onig_region_new(),
                                                             [](OnigRegion* r) { onig_region_free(r, 1); });
    const auto* begin = reinterpret_cast<const OnigUChar*>(s.data());
    const auto* end = begin + s.size();
    std::size_t pos = 0;
    std::optional<std::size_t> last_match_end;
    while (pos <= s.size()) {
        const int r = onig_search(reg, begin, end, begin + pos, end, region.get(), ONIG_OPTION_NONE);
        if (r == ONIG_MISMATCH) break;
        if (r < 0) {  // a retry or stack limit: refuse rather than cut the text wrongly
            OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
            onig_error_code_to_str(message, r);
            throw value_error("tokenizer.json", "pattern matching failed: " + std::string(reinterpret_cast<const char*>(message)));
        }
        const auto a = static_cast<std::size_t>(region->beg[0]);
        const auto b = static_cast<std::size_t>(region->end[0]);
        if (a == b) {
            pos = b < s.size() ? b + decode_at(s, b).second : b + 1;
            if (last_match_end && *last_match_end == b) continue;
        } else {
            pos = b;
        }
        last_match_end = b;
        out.emplace_back(a, b);
    }
    return out;
}

std::string escape_regex(std::string_view s) {
    std::string out;
    for (char c : s) {
        if (std::strchr("\\.+*?()|[]{}^$#&-~", c) && c != '\0') out += '\\';
        out += c;
    }
    return out;
}

std::vector<std::pair<range, bool>> pattern::find_matches(std::string_view s) const {
    std::vector<std::pair<range, bool>> out;
    if (s.empty()) {
        out.push_back({{0, 0}, false});
    } else if (re) {
        std::size_t prev = 0;
        for (auto [a, b] : re->find_all(s)) {
            if (prev != a) out.push_back({{prev, a}, false});
            out.push_back({{a, b}, true});
            prev = b;
        }
        if (prev != s.size()) out.push_back({{prev, s.size()}, false});
    } else {
        std::size_t last = 0;
        for (std::size_t i = 0; i < s.size();) {
            auto [c, n] = decode_at(s, i);
            if (chars(c)) {
                if (last < i) out.push_back({{last, i}, false});
                out.push_back({{i, i + n}, true});
                last = i + n;
            }
            i += n;
        }
        if (s.size() > last) out.push_back({{last, s.size()}, false});
    }
    if (invert)
        for (auto& m : out) m.second = !m.second;
    return out;
}

// ---- normalized ---------------------------------------------------------------------

normalized normalized::from_original(std::string_view s, std::size_t shift) {
    normalized n;
    n.text = std::string(s);
    n.align.resize(s.size());
    for (std::size_t i = 0; i < s.size();) {
        const auto len = decode_at(s, i).second;
        for (std::size_t k = 0; k < len; ++k) n.align[i + k] = {shift + i, shift + i + len};
        i += len;
    }
    n.original_start = shift;
    n.original_end = shift + s.size();
    return n;
}

void normalized::transform_range(range r, const std::vector<std::pair<char32_t, int>>& dest,
                                 std::size_t initial_offset) {
    // The characters being replaced, consumed as dest replaces or removes them.
    std::vector<std::size_t> replaced_sizes;
    for (std::size_t i = r.first; i < r.second;) {
        const auto n = decode_at(text, i).second;
        replaced_sizes.push_back(n);
        i += n;
    }
    std::size_t next_replaced = 0;
    std::size_t offset = r.first;
    for (; next_replaced < initial_offset && next_replaced < replaced_sizes.size(); ++next_replaced)
        offset += replaced_sizes[next_replaced];
    std::string new_text;
    std::vector<range> new_align;
    for (const auto& [c, change] : dest) {
        const std::size_t idx = offset;
        range a;
        if (change > 0) {
            a = idx < 1 ? range{original_start, original_start} : align[idx - 1];
        } else {
            a = align[idx];
        }
        if (change <= 0 && next_replaced < replaced_sizes.size()) offset += replaced_sizes[next_replaced++];
        if (change < 0)
            for (int k = 0; k < -change && next_replaced < replaced_sizes.size(); ++k)
                offset += replaced_sizes[next_replaced++];
        const auto before = new_text.size();
        append_utf8(new_text, c);
        new_align.insert(new_align.end(), new_text.size() - before, a);
    }
    text.replace(r.first, r.second - r.first, new_text);
    align.erase(align.begin() + static_cast<std::ptrdiff_t>(r.first),
                align.begin() + static_cast<std::ptrdiff_t>(r.second));
    align.insert(align.begin() + static_cast<std::ptrdiff_t>(r.first), new_align.begin(), new_align.end());
}

void normalized::prepend(std::string_view s) {
    if (text.empty()) return;
    auto [next, n] = decode_at(text, 0);
    std::vector<std::pair<char32_t, int>> dest;
    int i = 0;
    for (char32_t c : to_code_points(s)) dest.push_back({c, i++ != 0 ? 1 : 0});
    dest.push_back({next, 1});
    transform_range({0, n}, dest, 0);
}

std::size_t normalized::replace(const pattern& p, std::string_view content, std::size_t max_bytes) {
    // NormalizedString::replace, in one pass: each match is removed and the content's
    // characters inserted with the alignment of the match's last byte (transform_range
    // with every character an insertion after initial_offset = the match's characters).
    const auto matches = p.find_matches(text);
    std::size_t size = 0;
    for (const auto& [m, is_match] : matches) size += is_match ? content.size() : m.second - m.first;
    if (size > max_bytes) return size;
    std::string new_text;
    std::vector<range> new_align;
    new_text.reserve(size);
    new_align.reserve(size);
    for (const auto& [m, is_match] : matches) {
        if (!is_match) {
            new_text.append(text, m.first, m.second - m.first);
            new_align.insert(new_align.end(), align.begin() + static_cast<std::ptrdiff_t>(m.first),
                             align.begin() + static_cast<std::ptrdiff_t>(m.second));
            continue;
        }
        const range a = m.second < 1 ? range{original_start, original_start} : align[m.second - 1];
        new_text.append(content);
        new_align.insert(new_align.end(), content.size(), a);
    }
    text = std::move(new_text);
    align = std::move(new_align);
    return size;
}

void normalized::filter(const std::function<bool(char32_t)>& keep) {
    int removed = 0;
    std::size_t removed_start = 0;
    std::vector<std::pair<char32_t, int>> dest;
    std::optional<char32_t> last;
    for (char32_t c : to_code_points(text)) {
        if (keep(c)) {
            if (last)
                dest.push_back({*last, -removed});
            else
                removed_start = static_cast<std::size_t>(removed);
            last = c;
            removed = 0;
        } else {
            ++removed;
        }
    }
    if (last) dest.push_back({*last, -removed});
    else removed_start = static_cast<std::size_t>(removed);
    transform(dest, removed_start);
}

void normalized::map(const std::function<char32_t(char32_t)>& f) {
    std::vector<std::pair<char32_t, int>> dest;
    for (char32_t c : to_code_points(text)) dest.push_back({f(c), 0});
    transform(dest, 0);
}

void normalized::lowercase() {
    std::vector<std::pair<char32_t, int>> dest;
    std::vector<char32_t> low;
    for (char32_t c : to_code_points(text)) {
        low.clear();
        to_lowercase(c, low);
        for (std::size_t k = 0; k < low.size(); ++k) dest.push_back({low[k], k > 0 ? 1 : 0});
    }
    transform(dest, 0);
}

// Normalises one segment (a starter and the characters that combine with it) with utf8proc.
static std::vector<char32_t> normalize_segment(const std::vector<char32_t>& seg, norm_form form) {
    int options = UTF8PROC_STABLE;
    switch (form) {
        case norm_form::nfc: options |= UTF8PROC_COMPOSE; break;
        case norm_form::nfd: options |= UTF8PROC_DECOMPOSE; break;
        case norm_form::nfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
        case norm_form::nfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    std::vector<utf8proc_int32_t> out(seg.size() * 4 + 8);
    // Decompose code point by code point into out, then reorder/compose in place.
    std::size_t used = 0;
    for (char32_t c32 : seg) {
        const auto c = static_cast<utf8proc_int32_t>(c32);
        for (;;) {
            int last_boundclass = 0;
            const auto n = utf8proc_decompose_char(c, out.data() + used, static_cast<utf8proc_ssize_t>(out.size() - used),
                                                   static_cast<utf8proc_option_t>((options & ~UTF8PROC_COMPOSE) | UTF8PROC_DECOMPOSE),
                                                   &last_boundclass);
            if (n < 0) return seg;
            if (static_cast<std::size_t>(n) > out.size() - used) {
                out.resize(out.size() * 2 + static_cast<std::size_t>(n));
                continue;
            }
            used += static_cast<std::size_t>(n);
            break;
        }
    }
    // Canonical ordering (Unicode §3.11, D109): every run of marks (combining class ≠ 0)
    // stably sorted by class. utf8proc_decompose does this; decompose_char and
    // normalize_utf32 do not.
    const auto ccc = [](utf8proc_int32_t c) { return utf8proc_get_property(c)->combining_class; };
    for (std::size_t k = 1; k < used; ++k) {
        const auto c = out[k];
        const auto cc = ccc(c);
        if (cc == 0) continue;
        std::size_t m = k;
        while (m > 0 && ccc(out[m - 1]) > cc) {
            out[m] = out[m - 1];
            --m;
        }
        out[m] = c;
    }
    const auto len = utf8proc_normalize_utf32(out.data(), static_cast<utf8proc_ssize_t>(used),
                                              static_cast<utf8proc_option_t>(options));
    if (len < 0) return seg;
    return std::vector<char32_t>(out.begin(), out.begin() + len);
}

static bool starts_segment(char32_t c) {
    const auto* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
    if (p->combining_class != 0) return false;
    // Hangul vowel and trailing jamo compose with the syllable before them.
    if ((c >= 0x1161 && c <= 0x1175) || (c >= 0x11A8 && c <= 0x11C2)) return false;
    return true;
}

void normalized::normalize_unicode(norm_form form) {
    // Per segment, outputs take the alignment of the input in the same position; extra
    // outputs are insertions, missing ones removals (unicode-normalization-alignments).
    const auto chars = to_code_points(text);
    std::vector<std::pair<char32_t, int>> dest;
    std::size_t i = 0;
    while (i < chars.size()) {
        std::size_t j = i + 1;
        while (j < chars.size() && !starts_segment(chars[j])) ++j;
        std::vector<char32_t> seg(chars.begin() + static_cast<std::ptrdiff_t>(i),
                                  chars.begin() + static_cast<std::ptrdiff_t>(j));
        const auto out = normalize_segment(seg, form);
        // A composition (fewer outputs) puts the removals on the first output, the starter
        // the marks composed into: tokenizers aligns "e\u0301\u0301" → "é\u0301" as é ← "e",
        // U+0301 ← the second U+0301 (unicode-normalization-alignments' recomposition).
        for (std::size_t k = 0; k < out.size(); ++k) {
            int change = k < seg.size() ? 0 : 1;
            if (k == 0 && out.size() < seg.size()) change = -static_cast<int>(seg.size() - out.size());
            dest.push_back({out[k], change});
        }
        i = j;
    }
    transform(dest, 0);
}

void normalized::strip(bool left, bool right) {
    const auto chars = to_code_points(text);
    std::size_t lead = 0, trail = 0;
    if (left)
        while (lead < chars.size() && is_whitespace(chars[lead])) ++lead;
    if (right)
        while (trail < chars.size() - lead && is_whitespace(chars[chars.size() - 1 - trail])) ++trail;
    if (lead == 0 && trail == 0) return;
    std::vector<std::pair<char32_t, int>> dest;
    for (std::size_t k = lead; k < chars.size() - trail; ++k) {
        int change = 0;
        if (k + 1 == chars.size() - trail) change = -static_cast<int>(trail);
        dest.push_back({chars[k], change});
    }
    transform(dest, lead);
}

range normalized::original_range(range r) const {
    if (r.first == r.second) return {original_start + r.first, original_start + r.first};
    if (r.first > r.second || r.second > align.size()) return {original_start, original_start};
    return {align[r.first].first, align[r.second - 1].second};
}

normalized normalized::slice(range r) const {
    normalized n;
    n.text = text.substr(r.first, r.second - r.first);
    n.align.assign(align.begin() + static_cast<std::ptrdiff_t>(r.first),
                   align.begin() + static_cast<std::ptrdiff_t>(r.second));
    if (r.first < r.second) {
        n.original_start = align[r.first].first;
        n.original_end = align[r.second - 1].second;
    } else {
        n.original_start = n.original_end = original_start;
    }
    return n;
}

std::vector<normalized> normalized::split(const pattern& p, split_behavior behavior) const {
    auto matches = p.find_matches(text);
    std::vector<std::pair<range, bool>> splits;  // (range, remove)
    bool previous_match = false;
    switch (behavior) {
        case split_behavior::isolated:
            for (auto& [r, m] : matches) splits.push_back({r, false});
            break;
        case split_behavior::removed:
            splits = matches;
            break;
        case split_behavior::contiguous:
            for (auto& [r, m] : matches) {
                if (m == previous_match && !splits.empty()) splits.back().first.second = r.second;
                else splits.push_back({r, false});
                previous_match = m;
            }
            break;
        case split_behavior::merged_with_previous:
            for (auto& [r, m] : matches) {
                if (m && !previous_match && !splits.empty()) splits.back().first.second = r.second;
                else splits.push_back({r, false});
                previous_match = m;
            }
            break;
        case split_behavior::merged_with_next:
            for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
                if (it->second && !previous_match && !splits.empty()) splits.back().first.first = it->first.first;
                else splits.push_back({it->first, false});
                previous_match = it->second;
            }
            std::reverse(splits.begin(), splits.end());
            break;
    }
    std::vector<normalized> out;
    for (auto& [r, remove] : splits)
        if (!remove) out.push_back(slice(r));
    return out;
}

}  // namespace attn::tokenizer::detail
