#pragma once
// The tokenizer's building blocks, modelled on `tokenizers`' own (tokenizers/src/tokenizer/
// normalizer.rs, pre_tokenizer.rs, pattern.rs): a normalized string that keeps, for every
// byte, the original byte range it comes from, so that every offset a token reports is
// the one `tokenizers` reports.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attn::tokenizer::detail {

using range = std::pair<std::size_t, std::size_t>;

// ---- Unicode (utf8proc) -------------------------------------------------------------

/// The code point starting at s[i] (s is valid UTF-8) and its length in bytes.
std::pair<char32_t, std::size_t> decode_at(std::string_view s, std::size_t i);
/// Appends the UTF-8 encoding of c.
void append_utf8(std::string& out, char32_t c);
/// Byte offset of the first ill-formed sequence, or npos.
std::size_t invalid_utf8_at(std::string_view s);
std::vector<char32_t> to_code_points(std::string_view s);
/// Rust's char::is_whitespace (the White_Space property).
bool is_whitespace(char32_t c);
/// Rust regex's \w: letters, marks, numbers, connector punctuation, join controls.
bool is_word_char(char32_t c);
/// Unicode punctuation (general categories P*).
bool is_punctuation(char32_t c);
/// Rust's char::is_numeric (general categories Nd, Nl, No).
bool is_numeric(char32_t c);
/// General categories Cc, Cf, Cn, Co, Cs.
bool is_other(char32_t c);
bool is_mark_nonspacing(char32_t c);
/// Rust's char::to_lowercase (full mapping: U+0130 gives two code points).
void to_lowercase(char32_t c, std::vector<char32_t>& out);
enum class norm_form { nfc, nfd, nfkc, nfkd };
/// The extended grapheme clusters of s (valid UTF-8) as consecutive byte ranges, as the
/// unicode-segmentation crate's graphemes(true) cuts them (utf8proc_grapheme_break_stateful).
std::vector<range> graphemes(std::string_view s);

// ---- Regular expressions (Oniguruma) ------------------------------------------------

/// A compiled Oniguruma pattern (UTF-8, default syntax), as the onig crate builds it.
class regex {
public:
    /// Throws format_error naming `what` when Oniguruma refuses the pattern.
    regex(const std::string& pattern, const std::string& what);
    ~regex();
    regex(const regex&) = delete;
    regex& operator=(const regex&) = delete;
    /// Non-overlapping matches, left to right, as the onig crate's find_iter yields them
    /// (an empty match right after the previous match is skipped). Throws value_error when
    /// Oniguruma gives up (its retry or stack limit) rather than return a partial cut.
    std::vector<range> find_all(std::string_view s) const;

private:
    void* reg_ = nullptr;
};

/// What matches in a string: a regex, or single characters selected by a predicate.
struct pattern {
    std::shared_ptr<const regex> re;
    std::function<bool(char32_t)> chars;
    bool invert = false;
    /// tokenizers' Pattern::find_matches: the string cut into consecutive pieces, each
    /// flagged as a match or not (an empty string gives one empty non-match).
    std::vector<std::pair<range, bool>> find_matches(std::string_view s) const;
};

/// Escapes every metacharacter of `s` for a literal Oniguruma pattern (regex::escape).
std::string escape_regex(std::string_view s);

// ---- The normalized string ------------------------------------------------------------

enum class split_behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

struct normalized {
    std::string text;              // the normalized text
    std::vector<range> align;      // per byte of text: its range in the original, in bytes
    std::size_t original_start = 0;  // this piece's original range
    std::size_t original_end = 0;

    static normalized from_original(std::string_view s, std::size_t shift);

    /// tokenizers' NormalizedString::transform_range over bytes [a, b): `dest` gives the new
    /// characters with their change (0 replaces one character, +1 inserts, -n replaces one
    /// and removes n more); `initial_offset` characters are removed first.
    void transform_range(range r, const std::vector<std::pair<char32_t, int>>& dest, std::size_t initial_offset);
    void transform(const std::vector<std::pair<char32_t, int>>& dest, std::size_t initial_offset) {
        transform_range({0, text.size()}, dest, initial_offset);
    }
    void prepend(std::string_view s);
    /// Every match of p replaced by content. Returns the replaced text's size in bytes; when
    /// that is more than max_bytes, the string is left as it was (nothing is built).
    std::size_t replace(const pattern& p, std::string_view content, std::size_t max_bytes = static_cast<std::size_t>(-1));
    void filter(const std::function<bool(char32_t)>& keep);
    void map(const std::function<char32_t(char32_t)>& f);
    void lowercase();
    void normalize_unicode(norm_form form);
    void strip(bool left, bool right);
    normalized slice(range r) const;
    std::vector<normalized> split(const pattern& p, split_behavior behavior) const;
    /// The original range of normalized bytes [a, b) (tokenizers' convert_offsets).
    range original_range(range r) const;
};

}  // namespace attn::tokenizer::detail
