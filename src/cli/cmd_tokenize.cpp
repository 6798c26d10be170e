// attn tokenize: texts through a Hugging Face tokenizer.json, as the Rust `tokenizers`
// library encodes them (attn/tokenizer/tokenizer.hpp): ids, tokens, labels, offsets in code
// points and bytes, word ids, special tokens mask.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/io/formats.hpp"
#include "attn/io/json.hpp"
#include "attn/io/limits.hpp"
#include "attn/io/output.hpp"
#include "attn/pipeline/text.hpp"
#include "attn/tokenizer/tokenizer.hpp"
#include "commands.hpp"

namespace attn::cli {

namespace {

/// --format's choices: the text formats of the registry but the page (json, jsonl, csv,
/// table; each written here, as an encoding's listing), and ids, one line of ids a text.
std::vector<std::string> tokenize_formats() {
    std::vector<std::string> names = io::format_names_where([](io::format f) { return !f->binary && !f->page; });
    names.push_back("ids");
    return names;
}

struct tokenize_cli {
    std::vector<std::string> texts;
    std::string tokenizer_path;
    std::string text_file;
    bool no_special_tokens = false;
    std::string format = "json";
    std::string output;
};


std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
    std::string out = "\"";
    for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

nlohmann::json to_json(const std::string& text, const tokenizer::encoding& e, const tokenizer::tokenizer& tok) {
    nlohmann::json j;
    j["text"] = text;
    j["ids"] = e.ids;
    j["tokens"] = e.tokens;
    nlohmann::json labels = nlohmann::json::array(), offsets = nlohmann::json::array(), bytes = nlohmann::json::array(),
                   words = nlohmann::json::array();
    for (std::size_t k = 0; k < e.ids.size(); ++k) {
        labels.push_back(tok.token_label(e.ids[k]));
        offsets.push_back({e.offsets[k].first, e.offsets[k].second});
        bytes.push_back({e.byte_offsets[k].first, e.byte_offsets[k].second});
        words.push_back(e.word_ids[k] ? nlohmann::json(*e.word_ids[k]) : nlohmann::json());
    }
    j["labels"] = labels;
    j["offsets"] = offsets;
    j["byte_offsets"] = bytes;
    j["word_ids"] = words;
    j["special_tokens_mask"] = e.special_tokens_mask;
    return j;
}

/// Width on a terminal: code points (tokens are UTF-8; wide CJK glyphs are not accounted
/// for), as the matrix tables of src/io/table.cpp count them.
std::size_t display_width(const std::string& s) {
    std::size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

/// `rows` (the first is the header) in columns two spaces apart, as every other table
/// (cli/columns.hpp): position and id right-aligned, the rest left-aligned, the last
/// column unpadded; widths in code points.
void print_aligned(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
    std::vector<std::size_t> width(rows.front().size(), 0);
    for (const auto& r : rows)
        for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], display_width(r[c]));
    for (const auto& r : rows) {
        std::string line;
        for (std::size_t c = 0; c < r.size(); ++c) {
            const std::string pad(width[c] - display_width(r[c]), ' ');
            if (c) line += "  ";
            if (c < 2) line += pad + r[c];
            else line += r[c] + (c + 1 < r.size() ? pad : "");
        }
        out << line << '\n';
    }
}

void write_all(std::ostream& out, const tokenize_cli& c, const std::vector<std::string>& texts,
               const std::vector<tokenizer::encoding>& encodings, const tokenizer::tokenizer& tok) {
    // Labels and tokens of byte-level pieces can hold U+FFFD but are valid UTF-8.
    const auto dump = [](const nlohmann::json& j, int indent) {
        return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
    };
    if (c.format == "json") {
        nlohmann::json all = nlohmann::json::array();
        for (std::size_t i = 0; i < texts.size(); ++i) all.push_back(to_json(texts[i], encodings[i], tok));
        out << dump(all, 1) << '\n';
    } else if (c.format == "jsonl") {
        for (std::size_t i = 0; i < texts.size(); ++i) out << dump(to_json(texts[i], encodings[i], tok), -1) << '\n';
    } else if (c.format == "ids") {
        for (const auto& e : encodings) {
            for (std::size_t k = 0; k < e.ids.size(); ++k) out << (k ? " " : "") << e.ids[k];
            out << '\n';
        }
    } else {
        const bool csv = c.format == "csv";
        if (csv) out << "text,position,id,token,label,start,end,byte_start,byte_end,word_id,special\n";
        for (std::size_t i = 0; i < texts.size(); ++i) {
            const auto& e = encodings[i];
            std::vector<std::vector<std::string>> rows;
            if (!csv) {
                if (i > 0) out << '\n';
                out << "text " << i << ": " << dump(nlohmann::json(texts[i]), -1) << '\n';
                rows.push_back({"position", "id", "token", "label", "chars", "bytes", "word", "special"});
            }
            for (std::size_t k = 0; k < e.ids.size(); ++k) {
                const auto token = dump(nlohmann::json(e.tokens[k]), -1);
                const auto label = dump(nlohmann::json(tok.token_label(e.ids[k])), -1);
                const auto word = e.word_ids[k] ? std::to_string(*e.word_ids[k]) : std::string();
                if (csv) {
                    out << i << ',' << k << ',' << e.ids[k] << ',' << csv_field(e.tokens[k]) << ','
                        << csv_field(tok.token_label(e.ids[k])) << ',' << e.offsets[k].first << ',' << e.offsets[k].second
                        << ',' << e.byte_offsets[k].first << ',' << e.byte_offsets[k].second << ',' << word << ','
                        << int(e.special_tokens_mask[k]) << '\n';
                } else {
                    rows.push_back({std::to_string(k), std::to_string(e.ids[k]), token, label,
                                    std::to_string(e.offsets[k].first) + "-" + std::to_string(e.offsets[k].second),
                                    std::to_string(e.byte_offsets[k].first) + "-" + std::to_string(e.byte_offsets[k].second),
                                    word.empty() ? "-" : word, std::to_string(int(e.special_tokens_mask[k]))});
                }
            }
            if (!csv) print_aligned(out, rows);
        }
    }
}

int run_tokenize(const tokenize_cli& c) {
    std::vector<std::string> texts = c.texts;
    std::string path = c.tokenizer_path;
    std::error_code ec;
    if (path.empty()) {
        // `attn tokenize TEXT... CHECKPOINT_DIR` or `attn tokenize CHECKPOINT_DIR TEXT...`:
        // the last argument, else the first, is the checkpoint directory, whose
        // tokenizer.json is the model's own.
        if (!texts.empty() && std::filesystem::is_directory(texts.back(), ec)) {
            path = texts.back();
            texts.pop_back();
        } else if (!texts.empty() && std::filesystem::is_directory(texts.front(), ec)) {
            path = texts.front();
            texts.erase(texts.begin());
        } else {
            throw usage_error("--tokenizer", "no tokenizer " +
                                                 expected_got("--tokenizer FILE or a checkpoint directory as the first or last argument",
                                                              texts.empty() ? "neither" : "no directory"));
        }
    }
    if (!c.text_file.empty()) {
        const auto more = read_texts(c.text_file, io::max_array_bytes());
        texts.insert(texts.end(), more.begin(), more.end());
    }
    if (texts.empty()) throw usage_error("TEXT", "nothing to tokenize " + expected_got("TEXT or --text-file", "neither"));
    if (std::filesystem::is_directory(path, ec)) path = (std::filesystem::path(path) / "tokenizer.json").string();
    // Read as every side file is: bounded in size and nesting (docs/design.md §2, Hostile input).
    const auto tok = load_tokenizer(path);
    std::vector<tokenizer::encoding> encodings;
    for (std::size_t i = 0; i < texts.size(); ++i) {
        try {
            encodings.push_back(tok.encode(texts[i], !c.no_special_tokens));
        } catch (const value_error& e) {
            if (e.source() != "text") throw;
            throw value_error("text " + std::to_string(i), e.message());
        }
    }
    if (c.output.empty()) {
        write_all(std::cout, c, texts, encodings, tok);
        std::cout.flush();
        if (!std::cout) throw io_error("stdout", "cannot write");
    } else {
        io::atomic_file f(c.output);
        write_all(f.stream(), c, texts, encodings, tok);
        f.commit();
    }
    return exit_ok;
}

}  // namespace

void setup_tokenize(CLI::App& app, int& exit_status) {
    auto c = std::make_shared<tokenize_cli>();
    CLI::App* sub = app.add_subcommand(
        "tokenize",
        "Texts through a Hugging Face tokenizer.json, as the Rust tokenizers library encodes them: ids, "
        "tokens, labels (each token decoded alone), offsets in code points and bytes, word ids, special "
        "tokens mask. Tokens a post-processor adds have offsets 0-0 and no word.");
    sub->add_option("TEXT", c->texts,
                    "Texts to tokenize (UTF-8); without --tokenizer, the last (or the first) is a checkpoint "
                    "directory holding tokenizer.json");
    sub->add_option("--tokenizer", c->tokenizer_path, "tokenizer.json, or a directory holding one");
    sub->add_option("--text-file", c->text_file, "More texts, one per line");
    sub->add_flag("--no-special-tokens", c->no_special_tokens, "add_special_tokens=False: no BOS, [CLS], [SEP]...");
    sub->add_option("--format", c->format, "json (default), jsonl, csv, table, or ids (one line per text: its ids)")
        ->check(CLI::IsMember(tokenize_formats()));
    sub->add_option("-o,--output", c->output, "Write to FILE (atomically) instead of stdout");
    sub->footer(
        "Examples:\n"
        "  attn tokenize \"Hello world\" --tokenizer tokenizer.json --format table\n"
        "  attn tokenize \"Hello world\" \"Goodbye\" checkpoints/gpt2\n"
        "  attn tokenize --text-file texts.txt --tokenizer model_dir --format jsonl");
    sub->callback([c, &exit_status]() { exit_status = run_tokenize(*c); });
}

}  // namespace attn::cli
