// The validators and value parsers of the option table's rows (option_validators.hpp,
// option_table.cpp): counts, numbers, window sides, token ids and layer lists, each
// refusal quoting the text as given.
#include "option_validators.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "attn/error.hpp"
#include "attn/text.hpp"
#include "pipeline_cli.hpp"

namespace attn::cli {

namespace {
constexpr std::size_t max_listed_layers = 1 << 16;
}  // namespace

std::vector<std::size_t> parse_layer_list(const std::string& text) {
    const auto garbage = [&] {
        return usage_error("--layer", "not a layer " + expected_got("a number ≥ 0, a range A-B, a list of them such as 0,5,10-12, or all", text));
    };
    const auto number = [&](std::string_view digits) {
        std::size_t n = 0;
        const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
        if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size()) throw garbage();
        return n;
    };
    std::vector<std::size_t> layers;
    std::size_t begin = 0;
    for (;;) {
        const std::size_t comma = std::min(text.find(',', begin), text.size());
        const std::string_view item = std::string_view(text).substr(begin, comma - begin);
        if (item.empty())
            throw usage_error("--layer", "an empty item in the list " + expected_got("layers separated by single commas", text));
        const std::size_t dash = item.find('-');
        const std::size_t a = number(item.substr(0, dash));
        const std::size_t b = dash == std::string_view::npos ? a : number(item.substr(dash + 1));
        if (b < a) throw usage_error("--layer", "a descending range " + expected_got("A-B with A ≤ B", std::string(item)));
        // Listed one by one, so a range is bounded before it is (the model's own count is
        // checked by the run).
        if (b - a >= max_listed_layers || layers.size() + (b - a) >= max_listed_layers)
            throw usage_error("--layer", "more layers than any model has " +
                                             expected_got("at most " + std::to_string(max_listed_layers) + " layers", text));
        for (std::size_t l = a;; ++l) {
            layers.push_back(l);
            if (l == b) break;
        }
        if (comma == text.size()) break;
        begin = comma + 1;
    }
    std::sort(layers.begin(), layers.end());
    const auto twice = std::adjacent_find(layers.begin(), layers.end());
    if (twice != layers.end())
        throw usage_error("--layer", "layer " + std::to_string(*twice) + " listed twice " + expected_got("each layer once", text));
    return layers;
}

std::vector<std::string> split_words(const std::string& text) {
    std::istringstream in(text);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    return words;
}

namespace {

/// The text of a bad value, quoted so that an empty one shows: 'abc', ''.
std::string in_quotes(const std::string& text) { return "'" + text + "'"; }

/// True when all of `text` is a whole number in `value` (no sign for unsigned types).
template <class T>
std::errc whole_number(const std::string& text, T& value) {
    const char* end = text.data() + text.size();
    const auto [p, ec] = std::from_chars(text.data(), end, value);
    if (ec == std::errc::result_out_of_range) return ec;
    return ec == std::errc() && p == end && !text.empty() ? std::errc() : std::errc::invalid_argument;
}

}  // namespace

/// CLI11 converts "-1" to a size_t by wrapping it to 2^64 − 1, and a count too large for
/// 64 bits to 2^64 − 1, and reports "abc" or "1e30" as "Could not convert": counts refuse
/// a sign, anything but digits and anything over 2^63 − 1, quoting the text.
const CLI::Validator non_negative_count(
    [](std::string& text) {
        if (text.find('-') != std::string::npos) return "not a count " + expected_got("a whole number ≥ 0", text);
        long long n = 0;
        const std::errc ec = whole_number(text, n);
        if (ec == std::errc::result_out_of_range)
            return "too large " + expected_got("at most " + std::to_string(std::numeric_limits<long long>::max()), text);
        if (ec != std::errc()) return "not a whole number " + expected_got("a whole number ≥ 0", in_quotes(text));
        return std::string();
    },
    "");

/// A whole number for a --window side (pipeline_settings refuses those below −1, the
/// unbounded side, naming the whole LEFT,RIGHT).
const CLI::Validator window_side(
    [](std::string& text) {
        long long n = 0;
        const std::errc ec = whole_number(text, n);
        if (ec == std::errc::invalid_argument)
            return "not a whole number " + expected_got("a whole number ≥ -1 (-1: unbounded)", in_quotes(text));
        if (ec != std::errc())
            return "too large " + expected_got("at most " + std::to_string(std::numeric_limits<long long>::max()), text);
        return std::string();
    },
    "");

const CLI::Validator worker_threads = CLI::Range(1, 1 << 20);

/// Any whole number that fits 64 bits (--pad-id).
const CLI::Validator any_whole_number(
    [](std::string& text) {
        long long n = 0;
        const std::errc ec = whole_number(text, n);
        if (ec == std::errc::invalid_argument) return "not a whole number " + expected_got("a whole number", in_quotes(text));
        if (ec != std::errc())
            return "out of range " + expected_got("a whole number of at most 64 bits", text);
        return std::string();
    },
    "");

/// The token ids of `--ids` from all the words given to it: "3,1,4", "3 1 4" (one word
/// or several), "[3, 1, 4]" (a JSON list). Ids are whole numbers from 0 to 2^63 − 1,
/// refused with the text as given (a number too large for 64 bits is not rounded).
std::vector<long long> parse_ids(const std::vector<std::string>& words) {
    std::string text;
    for (const auto& w : words) text += (text.empty() ? "" : " ") + w;
    const std::string expected = "token ids like 3,1,4 or '3 1 4' or '[3, 1, 4]'";
    std::string list = text;
    const std::size_t first = list.find_first_not_of(" \t"), last = list.find_last_not_of(" \t");
    list = first == std::string::npos ? "" : list.substr(first, last - first + 1);
    if (!list.empty() && (list.front() == '[' || list.back() == ']')) {
        if (list.size() < 2 || list.front() != '[' || list.back() != ']')
            throw usage_error("--ids", "not a list " + expected_got(expected, in_quotes(text)));
        list = list.substr(1, list.size() - 2);
    }
    std::vector<long long> ids;
    std::size_t at = 0;
    do {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        const std::vector<std::string> items = split_words(list.substr(at, comma - at));
        if (items.empty())
            throw usage_error("--ids", (text.find_first_not_of(" \t") == std::string::npos ? "no token ids " : "an empty id ") +
                                           expected_got(expected, in_quotes(text)));
        for (const auto& item : items) {
            long long id = 0;
            const std::errc ec = whole_number(item, id);
            if (ec == std::errc::invalid_argument) throw usage_error("--ids", "not a token id " + expected_got(expected, in_quotes(item)));
            if (ec != std::errc() || id < 0)
                throw usage_error("--ids", "out of range " + expected_got("ids from 0 to " + std::to_string(std::numeric_limits<long long>::max()), item));
            ids.push_back(id);
        }
        at = comma + 1;
    } while (at <= list.size());
    return ids;
}



/// A number option that must be finite: CLI11 reads "nan" and "inf" as doubles, which
/// then gave all-NaN output and "scale": null.
const CLI::Validator finite_number(
    [](std::string& text) {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        return end != text.c_str() && *end == '\0' && !std::isfinite(v)
                   ? "not a finite number " + expected_got("a finite number", text)
                   : std::string();
    },
    "");  // no description: the type name already says FLOAT

const CLI::Validator a_number(
    [](std::string& text) {
        char* end = nullptr;
        std::strtod(text.c_str(), &end);
        return text.empty() || end == text.c_str() || *end != '\0' || std::isspace(static_cast<unsigned char>(text[0]))
                   ? "not a number " + expected_got("a number", in_quotes(text))
                   : std::string();
    },
    "");

const CLI::Validator positive_number(
    [](std::string& text) {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        return end != text.c_str() && *end == '\0' && !(v > 0) ? "not a number > 0 " + expected_got("a number > 0", text)
                                                                 : std::string();
    },
    "");

const CLI::Validator non_negative_whole_number = non_negative_count;

}  // namespace attn::cli
