// --help: every subcommand ends with examples, and every line fits 80 columns.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "cli_util.hpp"

namespace {

std::size_t columns(const std::string& s) {
    std::size_t n = 0;
    for (const unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
}

}  // namespace

TEST_CASE("every --help fits 80 columns, and every subcommand's ends with two or three examples") {
    for (const std::string sub : {"", "compute", "generate", "posenc", "inspect", "compare", "plot", "rope", "rollout", "view", "tokenize"}) {
        CAPTURE(sub);
        const auto r = attn_test::run_attn(sub + " --help");
        CHECK(r.code == 0);
        const auto lines = lines_of(r.out);
        REQUIRE(!lines.empty());
        for (const auto& line : lines) {
            CAPTURE(line);
            CHECK(columns(line) <= 80);
        }
        if (sub.empty()) continue;
        std::size_t at = lines.size();
        while (at > 0 && lines[at - 1] != "Examples:") --at;
        REQUIRE(at > 0);  // an "Examples:" line
        const std::size_t examples = lines.size() - at;
        CHECK(examples >= 2);
        CHECK(examples <= 3);
        for (std::size_t i = at; i < lines.size(); ++i) CHECK(lines[i].rfind("  attn ", 0) == 0);
    }
    // compute --help describes -o DIR/, manifests and the table precision.
    const std::string compute = attn_test::joined_words(attn_test::run_attn("compute --help").out);
    CHECK(compute.find("ending in / is a folder") != std::string::npos);
    CHECK(compute.find("--manifest jobs.jsonl") != std::string::npos);
    CHECK(compute.find("4 in tables") != std::string::npos);
}
