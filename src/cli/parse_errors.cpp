#include "parse_errors.hpp"

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <sys/stat.h>
#include <string_view>
#include <vector>

#include "attn/error.hpp"
#include "attn/text.hpp"
#include "diagnostics.hpp"

namespace attn::cli {

namespace {

/// Levenshtein distance (insertions, deletions, substitutions), for suggestions.
std::size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = up;
        }
    }
    return row[b.size()];
}

/// The candidate nearest to `word`, if it is near enough to be a typo: at most 2 edits,
/// and fewer than half the word's length.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
    std::string best;
    std::size_t best_d = 3;
    for (const auto& c : candidates) {
        const std::size_t d = edit_distance(word, c);
        if (d < best_d && 2 * d < word.size()) best = c, best_d = d;
    }
    return best;
}

std::vector<std::string> command_names(const CLI::App& app) {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
    return names;
}

std::string joined(const std::vector<std::string>& names) {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
    return s;
}

bool is_file(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
}

/// The subcommand the command line chose, or null.
const CLI::App* chosen(const CLI::App& app) {
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
        if (sub->parsed()) return sub;
    return nullptr;
}

/// "--mask" and "-o" spellings of every option of `sub` (and the help flag).
std::vector<std::string> option_names(const CLI::App& sub) {
    std::vector<std::string> names{"--help"};
    for (const CLI::Option* o : sub.get_options()) {
        for (const auto& l : o->get_lnames()) names.push_back("--" + l);
        for (const auto& s : o->get_snames()) names.push_back("-" + s);
    }
    return names;
}

std::string unknown_word(const std::string& word, const CLI::App& app) {
    const CLI::App* sub = chosen(app);
    if (word.size() > 1 && word[0] == '-') {
        std::string name = word.substr(0, word.find('='));
        const std::string near = sub ? nearest(name, option_names(*sub)) : "";
        return "unknown option " + name +
               (near.empty() ? " (see attn " + (sub ? sub->get_name() + " " : std::string()) + "--help)"
                             : " (did you mean " + near + "?)");
    }
    return "unexpected argument " + word + (sub ? " (see attn " + sub->get_name() + " --help)" : "");
}

}  // namespace

std::vector<std::string> split_empty_values(std::vector<std::string> words) {
    for (std::size_t i = 0; i < words.size(); ++i) {
        if (words[i] == "--") break;
        if (words[i].size() > 3 && words[i].compare(0, 2, "--") == 0 && words[i].back() == '=' &&
            words[i].find('=') == words[i].size() - 1) {
            words[i].pop_back();
            words.insert(words.begin() + static_cast<std::ptrdiff_t>(i) + 1, std::string());
            ++i;
        }
    }
    return words;
}

void refuse_repeated_lists(const CLI::App& app, const std::vector<std::string>& words) {
    const CLI::App* sub = chosen(app);
    if (!sub) return;
    static const std::vector<std::string> adding{"--text", "--mask", "--dump"};
    std::vector<std::pair<std::string, int>> seen;
    for (const std::string& w : words) {
        if (w == "--") break;
        if (w.size() < 3 || w.compare(0, 2, "--") != 0) continue;
        const std::string name = w.substr(0, w.find('='));
        const CLI::Option* o = sub->get_option_no_throw(name);
        if (!o || o->get_items_expected_max() <= 1 || std::find(adding.begin(), adding.end(), name) != adding.end()) continue;
        auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& p) { return p.first == name; });
        if (it == seen.end()) {
            seen.emplace_back(name, 1);
            continue;
        }
        throw usage_error(name, "given more than once " + expected_got("one " + name, std::to_string(++it->second)));
    }
}

std::string parse_error_message(const CLI::ParseError& e, const CLI::App& app, int argc, const char* const* argv) {
    // A value CLI11 echoes can be megabytes (a manifest line): std::regex recurses once
    // per character matched and would overflow the stack, so a long message is shortened
    // first. Up to 4 KiB it is kept whole: the 309 digits of DBL_MAX in a range are
    // recognised below and said as "≥ 0".
    const std::string what = std::string_view(e.what()).size() > 4096 ? shortened(e.what()) : std::string(e.what());
    std::smatch m;
    if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
        static const std::regex one("The following arguments? (?:was|were) not expected: (.*)");
        if (std::regex_match(what, m, one)) {
            // CLI11 lists the extras in no useful order ("1e308 --std"): an option name
            // is what the user mistyped, its value only followed it.
            const std::string words = m[1];
            std::string first;
            for (std::size_t at = 0; at < words.size();) {
                const std::size_t space = std::min(words.find(' ', at), words.size());
                const std::string word = words.substr(at, space - at);
                if (first.empty() || (word.size() > 1 && word[0] == '-' && first[0] != '-')) first = word;
                at = space + 1;
            }
            return unknown_word(first, app);
        }
        return what;
    }
    if (what == "A subcommand is required") {
        const std::vector<std::string> commands = command_names(app);
        const std::string list = "commands: " + joined(commands) + "; see attn --help";
        if (argc < 2) return "a command is required (" + list + ")";
        const std::string word = argv[1];
        if (word.size() > 1 && word[0] == '-') return unknown_word(word, app);
        if (is_file(word)) return "missing command: did you mean attn compute " + word + "? (" + list + ")";
        const std::string near = nearest(word, commands);
        if (!near.empty()) return "unknown command " + word + " (did you mean " + near + "?)";
        return "unknown command " + word + " (" + list + ")";
    }
    // A one-value option given again: "--heads: At Most 1 required but received 2".
    static const std::regex at_most("(--\\S+): At Most 1 required but received (\\d+)");
    if (std::regex_match(what, m, at_most))
        return m[1].str() + ": given more than once (expected one " + m[1].str() + ", got " + m[2].str() + ")";
    // CLI11's Range validator: "--heads: Value abc not in range 1 to 1048576".
    static const std::regex range("(\\S+): Value (.*) not in range (\\S+) to (\\S+)");
    if (std::regex_match(what, m, range)) {
        const CLI::App* sub = chosen(app);
        const CLI::Option* o = (sub ? sub : &app)->get_option_no_throw(m[1].str());
        const bool whole = o && o->get_type_name().find("INT") != std::string::npos;
        // CLI::NonNegativeNumber and PositiveNumber are ranges up to the largest double,
        // printed with 300 digits: say "≥ 0" or "> 0" instead.
        const double lo = std::strtod(m[3].str().c_str(), nullptr), hi = std::strtod(m[4].str().c_str(), nullptr);
        std::string expected = m[3].str() + " to " + m[4].str();
        if (hi >= 1e300) expected = lo == 0 ? "a number ≥ 0" : lo > 0 && lo < 1e-300 ? "a number > 0" : "a number ≥ " + general_number(lo);
        // Text that is no number at all is quoted, so that an empty value shows.
        const std::string got = m[2].str();
        char* end = nullptr;
        std::strtod(got.c_str(), &end);
        const bool number = !got.empty() && *end == '\0';
        return m[1].str() + (whole ? ": not a whole number in range" : ": not a number in range") + " (expected " +
               expected + ", got " + (number ? got : "'" + got + "'") + ")";
    }
    // An option given without its value: "--heads: 1 required UINT:INT in [1 - 1048576] missing".
    static const std::regex missing("(\\S+): (\\d+) required .* missing");
    if (std::regex_match(what, m, missing))
        return m[1].str() + ": a value is required (see attn " + (chosen(app) ? chosen(app)->get_name() + " " : "") +
               "--help)";
    // IsMember/CheckedTransformer: "--mask: causl not in {none,causal,padding}".
    static const std::regex member("(\\S+): (.*) not in \\{(.*)\\}");
    if (std::regex_match(what, m, member)) {
        std::string values = m[3].str();
        std::vector<std::string> options;
        for (std::size_t at = 0; at <= values.size();) {
            const std::size_t comma = std::min(values.find(',', at), values.size());
            options.push_back(values.substr(at, comma - at));
            at = comma + 1;
        }
        const std::string near = nearest(m[2].str(), options);
        return m[1].str() + ": unknown value " + m[2].str() + " (expected one of " + joined(options) +
               (near.empty() ? "" : "; did you mean " + near + "?") + ")";
    }
    // Any other option whose text CLI11 could not convert: "Could not convert: --atol = abc".
    static const std::regex convert("Could not convert: (\\S+) = (.*)");
    if (std::regex_match(what, m, convert)) {
        const CLI::App* sub = chosen(app);
        const CLI::Option* o = (sub ? sub : &app)->get_option_no_throw(m[1].str());
        const std::string type = o ? o->get_type_name().substr(0, o->get_type_name().find(':')) : "";
        const bool whole = type.find("INT") != std::string::npos || type == "N";
        return m[1].str() + (whole ? ": not a whole number (expected a whole number" : ": not a number (expected a number") +
               ", got '" + m[2].str() + "')";
    }
    static const std::regex required("(\\S+) is required");
    if (std::regex_match(what, m, required)) {
        const CLI::App* sub = chosen(app);
        return (sub ? "attn " + sub->get_name() + ": " : "") + m[1].str() + " is required (see attn " +
               (sub ? sub->get_name() + " " : "") + "--help)";
    }
    return what;
}

}  // namespace attn::cli
