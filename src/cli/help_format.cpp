#include "help_format.hpp"

#include <regex>
#include <sstream>
#include <vector>

namespace attn::cli {

namespace {

constexpr std::size_t line_width = 80;
constexpr std::size_t left_column = 30;

/// Display columns of UTF-8 text: continuation bytes take none.
std::size_t columns(const std::string& s) {
    std::size_t n = 0;
    for (const unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

class wrapping_formatter : public CLI::Formatter {
public:
    wrapping_formatter() { column_width(left_column); }

    std::string make_option(const CLI::Option* opt, bool is_positional) const override {
        return entry(make_option_name(opt, is_positional) + plain_type_names(make_option_opts(opt)), make_option_desc(opt));
    }
    std::string make_subcommand(const CLI::App* sub) const override {
        return entry(sub->get_display_name(true), sub->get_description());
    }
    std::string make_description(const CLI::App* app) const override {
        const std::string d = CLI::Formatter::make_description(app);
        return d.empty() ? d : wrap_text(d.substr(0, d.find_last_not_of('\n') + 1), line_width, 0) + "\n";
    }

    std::string make_footer(const CLI::App* app) const override {
        const std::string f = app->get_footer();
        return f.empty() ? f : wrap_text(f, line_width, 0) + "\n";
    }

private:
    /// CLI::Range and CLI::NonNegativeNumber append their description to the type name
    /// ("--heads UINT:INT in [1 - 1048576]", "--seed UINT:NONNEGATIVE"): the value is
    /// shown as N, like the other counts (--sink-k K, --top N); the error for a value out
    /// of range states the range.
    static std::string plain_type_names(const std::string& opts) {
        static const std::regex range(":(?:(?:U?INT|FLOAT|NUMBER) in \\[[^\\]]*\\]|NONNEGATIVE|POSITIVE)");
        static const std::regex bare("^ U?INT(?=$|[= ])");
        return std::regex_replace(std::regex_replace(opts, range, ""), bare, " N");
    }

    /// "  name" in the left column, the description wrapped in the right one (below the
    /// name when the name is too long), as CLI11's detail::format_help lays them out.
    std::string entry(const std::string& name, const std::string& description) const {
        std::string out = "  " + name;
        if (!description.empty()) {
            if (columns(out) >= left_column)
                out += "\n" + std::string(left_column, ' ');
            else
                out += std::string(left_column - columns(out), ' ');
            out += wrap_text(description, line_width - left_column, left_column);
        }
        return out + "\n";
    }
};

}  // namespace

std::string wrap_text(const std::string& text, std::size_t width, std::size_t indent) {
    std::string out;
    std::istringstream lines(text);
    std::string line;
    bool first_line = true;
    while (std::getline(lines, line)) {
        if (!first_line) out += "\n" + std::string(indent, ' ');
        first_line = false;
        if (columns(line) <= width) {  // fits: kept as written (aligned comments, spacing)
            out += line;
            continue;
        }
        std::size_t used = 0;
        std::istringstream words(line);
        // Keep the line's own leading spaces (examples, indented lists).
        const std::size_t lead = line.find_first_not_of(' ');
        if (lead != std::string::npos && lead > 0) {
            out += std::string(lead, ' ');
            used = lead;
        }
        std::string word;
        bool first_word = true;
        while (words >> word) {
            const std::size_t w = columns(word);
            if (!first_word && used + 1 + w > width) {
                out += "\n" + std::string(indent, ' ');
                used = 0;
            } else if (!first_word) {
                out += ' ';
                ++used;
            }
            out += word;
            used += w;
            first_word = false;
        }
    }
    return out;
}

std::shared_ptr<CLI::Formatter> help_formatter() { return std::make_shared<wrapping_formatter>(); }

}  // namespace attn::cli
