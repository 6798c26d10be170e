// The bash completion the build writes (completions/attn.bash.in filled in from --help by
// cmake/make_completion.cmake) follows the CLI: every long option that `attn compute --help`
// defines, every subcommand of `attn --help`, every choice, stage and model family; and the
// template names none of the families itself.

#include <doctest/doctest.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "attn/model/registry.hpp"
#include "attn/stages.hpp"
#include "cli_util.hpp"
#include "scratch_dir.hpp"

namespace {

const std::string completion_path = ATTN_COMPLETION;

/// The long options defined in a CLI11 help text (lines "  -o,--output TEXT ...").
std::set<std::string> defined_options(const std::string& help) {
    std::set<std::string> out;
    const std::regex line(R"(^ +(-[a-zA-Z],)?(--[a-z0-9][a-z0-9-]*))");
    std::istringstream in(help);
    for (std::string l; std::getline(in, l);) {
        std::smatch m;
        if (std::regex_search(l, m, line)) out.insert(m[2]);
    }
    return out;
}

/// True when `word` occurs in `text` delimited by non-option characters.
bool has_word(const std::string& text, const std::string& word) {
    auto is_word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; };
    for (std::size_t p = text.find(word); p != std::string::npos; p = text.find(word, p + 1)) {
        const bool start = p == 0 || !is_word_char(text[p - 1]);
        const bool end = p + word.size() == text.size() || !is_word_char(text[p + word.size()]);
        if (start && end) return true;
    }
    return false;
}

}  // namespace

namespace {

/// The completion script with bash-completion's helpers stubbed (the words split as a
/// shell would, no files) and complete_line WORDS… printing what _attn offers.
std::string completion_prelude() {
    return "source '" + completion_path + "'\n" + R"(
_init_completion() { words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; cur=${words[cword]}; prev=${words[cword-1]}; split=false; }
_filedir() { :; }
compopt() { :; }
complete_line() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _attn; echo "${COMPREPLY[*]}"; }
)";
}

}  // namespace

TEST_CASE("completion: every long option of attn compute --help is completed") {
    const std::string script = attn_test::slurp(completion_path);
    REQUIRE_FALSE(script.empty());
    const auto r = attn_test::run_attn("compute --help");
    REQUIRE(r.code == 0);
    const auto options = defined_options(r.out);
    CHECK(options.size() > 40);
    for (const auto& o : options) {
        CAPTURE(o);
        CHECK_MESSAGE(has_word(script, o), o << " is missing from _attn_compute_options (cmake/make_completion.cmake)");
    }
}

TEST_CASE("completion: every subcommand of attn --help is completed") {
    const std::string script = attn_test::slurp(completion_path);
    const auto r = attn_test::run_attn("--help");
    REQUIRE(r.code == 0);
    const std::string listing = r.out.substr(r.out.find("Subcommands:\n") + 13);
    std::istringstream in(listing.substr(0, listing.find("\n\n")));
    int count = 0;
    for (std::string l; std::getline(in, l);) {
        std::smatch m;
        if (!std::regex_search(l, m, std::regex("^  ([a-z][a-z0-9-]*)"))) continue;
        CAPTURE(m[1].str());
        CHECK(has_word(script, m[1]));
        ++count;
    }
    CHECK(count >= 1);
}

TEST_CASE("completion: --max-bytes is offered, with sizes, for every subcommand that reads inputs") {
    if (std::system("command -v bash >/dev/null 2>&1") != 0) return;
    const attn_test::scratch_dir scratch;
    std::string script = completion_prelude();
    for (const char* sub : {"compute", "plot", "inspect", "compare"}) {
        script += std::string("complete_line '") + ATTN_BINARY + "' " + sub + " --max-b\n";
        script += std::string("complete_line '") + ATTN_BINARY + "' " + sub + " --max-bytes ''\n";
    }
    attn_test::spit(scratch.path + "/complete.sh", script);
    REQUIRE(std::system(("bash '" + scratch.path + "/complete.sh' >'" + scratch.path + "/out' 2>&1").c_str()) == 0);
    std::string expected;
    for (int i = 0; i < 4; ++i) expected += "--max-bytes\n512M 1G 2G 4G\n";
    CHECK(attn_test::slurp(scratch.path + "/out") == expected);
}

TEST_CASE("completion: the script is valid bash") {
    if (std::system("command -v bash >/dev/null 2>&1") != 0) return;
    CHECK(std::system(("bash -n '" + completion_path + "'").c_str()) == 0);
}

TEST_CASE("completion: the values of --dump, --format, --stage, --style and --mask are offered") {
    if (std::system("command -v bash >/dev/null 2>&1") != 0) return;
    const attn_test::scratch_dir scratch;
    std::string script = completion_prelude();
    const std::string attn = std::string("'") + ATTN_BINARY + "'";
    script += "complete_line " + attn + " compute --dump weights,s\n";
    script += "complete_line " + attn + " compute --format n\n";
    script += "complete_line " + attn + " compute --mask c\n";
    script += "complete_line " + attn + " plot --stage s\n";
    script += "complete_line " + attn + " posenc --style ''\n";
    script += "complete_line " + attn + " inspect --format ''\n";
    attn_test::spit(scratch.path + "/complete.sh", script);
    REQUIRE(std::system(("bash '" + scratch.path + "/complete.sh' >'" + scratch.path + "/out' 2>&1").c_str()) == 0);
    CHECK(attn_test::slurp(scratch.path + "/out") ==
          "weights,scaled weights,scores weights,stats\n"
          "npy npz\n"
          "causal\n"
          "scaled scores\n"
          "interleaved concat\n"
          "table json\n");
}

TEST_CASE("completion: head_stats, --sink-k, attn rollout and compare --per-head are offered") {
    if (std::system("command -v bash >/dev/null 2>&1") != 0) return;
    const attn_test::scratch_dir scratch;
    std::string script = completion_prelude();
    const std::string attn = std::string("'") + ATTN_BINARY + "'";
    script += "complete_line " + attn + " compute --dump weights,head\n";
    script += "complete_line " + attn + " compute --sink\n";
    script += "complete_line " + attn + " roll\n";
    script += "complete_line " + attn + " rollout --tok\n";
    script += "complete_line " + attn + " rollout --max-bytes ''\n";
    script += "complete_line " + attn + " compare --per\n";
    script += "complete_line " + attn + " compare --per-head --format ''\n";
    attn_test::spit(scratch.path + "/complete.sh", script);
    REQUIRE(std::system(("bash '" + scratch.path + "/complete.sh' >'" + scratch.path + "/out' 2>&1").c_str()) == 0);
    CHECK(attn_test::slurp(scratch.path + "/out") ==
          "weights,head_stats\n"
          "--sinks --sink-tokens --sink-k\n"  // in the order of compute --help
          "rollout\n"
          "--tokens\n"
          "512M 1G 2G 4G\n"
          "--per-head\n"
          "table json\n");
}

TEST_CASE("completion: attn view is offered with the values of the compute options it takes") {
    if (std::system("command -v bash >/dev/null 2>&1") != 0) return;
    const attn_test::scratch_dir scratch;
    std::string script = completion_prelude();
    const std::string attn = std::string("'") + ATTN_BINARY + "'";
    script += "complete_line " + attn + " vi\n";
    script += "complete_line " + attn + " view --lay\n";
    script += "complete_line " + attn + " view --layer ''\n";
    script += "complete_line " + attn + " view --mask c\n";
    script += "complete_line " + attn + " view --max-bytes ''\n";
    attn_test::spit(scratch.path + "/complete.sh", script);
    REQUIRE(std::system(("bash '" + scratch.path + "/complete.sh' >'" + scratch.path + "/out' 2>&1").c_str()) == 0);
    CHECK(attn_test::slurp(scratch.path + "/out") ==
          "view\n"
          "--layout --layer\n"
          "0 1 all\n"
          "causal\n"
          "512M 1G 2G 4G\n");
}

TEST_CASE("completion: --arch offers the registered families, and completions/ names none") {
    if (std::system("command -v bash >/dev/null 2>&1") != 0) return;
    const attn_test::scratch_dir scratch;
    std::string script = completion_prelude();
    const std::string attn = std::string("'") + ATTN_BINARY + "'";
    script += "complete_line " + attn + " compute --arch ''\n";
    script += "complete_line " + attn + " compute --arch gemma\n";
    attn_test::spit(scratch.path + "/complete.sh", script);
    REQUIRE(std::system(("bash '" + scratch.path + "/complete.sh' >'" + scratch.path + "/out' 2>&1").c_str()) == 0);
    std::string all;
    for (const auto& n : attn::model::family_names()) all += (all.empty() ? "" : " ") + n;
    CHECK(attn_test::slurp(scratch.path + "/out") == all + "\ngemma gemma2 gemma3 gemma3n gemma4\n");
    // The source of the completion spells no family: the build fills them in.
    int files = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(std::string(ATTN_SOURCE_DIR) + "/completions")) {
        if (!e.is_regular_file()) continue;
        ++files;
        const std::string text = attn_test::slurp(e.path().string());
        for (const auto& n : attn::model::family_names()) {
            CAPTURE(e.path().string());
            CHECK_MESSAGE(!has_word(text, n), "family name " << n);
        }
    }
    CHECK(files >= 1);
}

TEST_CASE("completion: --dump offers every stage of the stage table") {
    if (std::system("command -v bash >/dev/null 2>&1") != 0) return;
    const attn_test::scratch_dir scratch;
    std::string script = completion_prelude() + "complete_line '" + ATTN_BINARY + "' compute --dump ''\n";
    attn_test::spit(scratch.path + "/complete.sh", script);
    REQUIRE(std::system(("bash '" + scratch.path + "/complete.sh' >'" + scratch.path + "/out' 2>&1").c_str()) == 0);
    CHECK(attn_test::slurp(scratch.path + "/out") == attn::stage_list(" ") + "\n");
}
