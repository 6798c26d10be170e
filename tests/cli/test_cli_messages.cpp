// Error and warning lines through the real binary when names and values come from
// hostile files: control characters escaped, echoed values bounded (src/cli/diagnostics).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "scratch_dir.hpp"

using attn_test::run_attn;
using attn_test::spit;

namespace {

/// A safetensors file: the 8-byte little-endian header length, the JSON header, `data`.
std::string safetensors(const nlohmann::json& header, const std::string& data) {
    const std::string h = header.dump();
    std::string out;
    for (int i = 0; i < 8; ++i) out += static_cast<char>((static_cast<std::uint64_t>(h.size()) >> (8 * i)) & 0xff);
    return out + h + data;
}

}  // namespace

TEST_CASE("messages: a tensor name with a newline and ESC is escaped, one line, not a forged error") {
    const attn_test::scratch_dir tmp;
    const std::string file = tmp.path + "/evil.safetensors";
    // F32 of shape [2] needs 8 bytes; the data section has 4.
    spit(file, safetensors({{"q\nattn: error: forged\x1b[2J", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}}},
                           std::string(4, '\0')));
    const auto r = run_attn("compute '" + file + "'");
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err == "attn: error: " + file +
                       ": safetensors header: tensor \"q\\nattn: error: forged\\x1b[2J\": data_offsets [0, 8] out of "
                       "bounds (expected an end within the 4 bytes of data, got 8)\n");
}

TEST_CASE("messages: warnings escape too: OSC, BEL, C1 controls, bidirectional overrides and bytes not UTF-8") {
    const attn_test::scratch_dir tmp;
    const std::string file = tmp.path + "/names.safetensors";
    // "q" is an input; the other tensor is not, so the warning names it.
    const std::string evil = "e\x1b]0;pwned\x07\xc2\x9b" "2m\xe2\x80\xae" "x\x7f";
    nlohmann::json header = {{"q", {{"dtype", "F32"}, {"shape", {1, 1}}, {"data_offsets", {0, 4}}}},
                             {"k", {{"dtype", "F32"}, {"shape", {1, 1}}, {"data_offsets", {4, 8}}}},
                             {"v", {{"dtype", "F32"}, {"shape", {1, 1}}, {"data_offsets", {8, 12}}}},
                             {evil, {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {12, 16}}}}};
    spit(file, safetensors(header, std::string(16, '\0')));
    const auto r = run_attn("compute '" + file + "' --dump weights --compact");
    CHECK(r.code == 0);
    CHECK(r.out.find("\"weights\":[[1]]") != std::string::npos);
    CHECK(r.err == "attn: warning: " + file +
                       ": ignored arrays e\\x1b]0;pwned\\x07\\u009b2m\\u202ex\\x7f (not an input name; see attn compute "
                       "--help)\n");
    // A file name that is not UTF-8: its bytes are shown as \xNN.
    const auto missing = run_attn("compute '" + tmp.path + "/\xff\xfe.npy'");
    CHECK(missing.code == 1);
    CHECK(missing.err == "attn: error: " + tmp.path + "/\\xff\\xfe.npy: cannot open file (No such file or directory)\n");
}

TEST_CASE("messages: a huge value on the command line is quoted in its first 200 bytes") {
    const std::string value(120000, 'a');
    const auto r = run_attn("compute data/x.npy --mask " + value);
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --mask: unknown value " + std::string(200, 'a') + "… (expected one of none, causal, padding)\n");
}

TEST_CASE("messages: a long message of short words keeps its beginning and its end") {
    const attn_test::scratch_dir tmp;
    std::string value;
    for (int i = 0; i < 3000; ++i) value += (i ? " w" : "w") + std::to_string(i);
    spit(tmp.path + "/jobs.jsonl", nlohmann::json{{"input", "x.npy"}, {"mask", value}}.dump() + "\n");
    const auto r = run_attn("compute --manifest '" + tmp.path + "/jobs.jsonl'");
    CHECK(r.code == 2);
    // At most 1024 bytes and " … ": the source and the start of the value, then the end of
    // the value and the "(expected …)" suffix. The record says the same.
    const std::string head = "attn: error: " + tmp.path + "/jobs.jsonl:1: --mask: unknown value w0 w1 w2 w3 ";
    const std::string tail = " w2998 w2999 (expected one of none, causal, padding)\n";
    CHECK(r.err.size() <= std::string("attn: error: \n").size() + 1024);
    CHECK(r.err.rfind(head, 0) == 0);
    CHECK(r.err.find(" … ") != std::string::npos);
    CHECK(r.err.size() > tail.size());
    CHECK(r.err.compare(r.err.size() - tail.size(), tail.size(), tail) == 0);
    CHECK(r.err == "attn: error: " + nlohmann::json::parse(r.out)["error"].get<std::string>() + "\n");
}
