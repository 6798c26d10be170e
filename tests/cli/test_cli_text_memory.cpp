// Text in within --max-bytes (docs/design.md §5.3): a text whose encoding alone would pass
// --max-bytes is refused before it is encoded (attn::text_encoding_bytes_per_byte), and a
// text under it is encoded by compute in the memory attn tokenize takes for the same text.
// Peak RSS of each run measured alone (attn_test::run_attn_measured), never a time.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "attn/pipeline/text.hpp"
#include "cli_util.hpp"
#include "scratch_dir.hpp"

namespace {

// One line of prose-like words, `bytes` long, the same on every machine.
std::string prose(std::size_t bytes) {
    const char* words[] = {"the", "attention", "weights", "of", "every", "head", "sum", "to", "one", "over", "keys",
                           "tokenizer", "merges", "pieces", "into", "words", "and", "labels", "them", "query", "layer"};
    std::string s;
    std::uint32_t state = 7;
    while (s.size() < bytes) {
        state = state * 1664525u + 1013904223u;
        s += words[(state >> 16) % (sizeof words / sizeof *words)];
        s += ' ';
    }
    s.resize(bytes);
    return s + "\n";
}

}  // namespace

TEST_CASE("text in: a text whose encoding alone passes --max-bytes is refused before it is encoded") {
    const attn_test::scratch_dir dir;
    const std::string text = dir.path + "/2mb.txt";
    attn_test::spit(text, prose(2'000'000));
    const std::string args = "compute data/llama-tiny --layer 0 --text-file '" + text + "' --max-bytes 64M -o '" + dir.path + "/out.npz'";
    const auto r = attn_test::run_attn(args);
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: text: 2000000 bytes of text need about 768.0 MB to encode (" +
                       std::to_string(attn::text_encoding_bytes_per_byte) +
                       " per byte) (expected at most --max-bytes 64 MiB; raise --max-bytes or give a shorter text)\n");
    CHECK(r.out == "");
    // Refused by plan: the text read (2 MB) and the checkpoint's tokenizer, nothing encoded
    // (encoding it first peaked at 1.2 GB).
    const auto m = attn_test::run_attn_measured(args);
    CHECK(m.code == 1);
    CHECK(static_cast<double>(m.peak_kb) / 1024.0 <= attn_test::peak_bound_mb(48));
}

TEST_CASE("text in: compute encodes a text in the memory attn tokenize takes for it") {
    const attn_test::scratch_dir dir;
    const std::string text = dir.path + "/200kb.txt";
    attn_test::spit(text, prose(200'000));
    // Under the plan (about 51 MB to encode), so it is encoded; then its tokens are refused
    // by GPT-2's position table (32 here), after the encoding's peak and before any array.
    // Both with AddressSanitizer's quarantine kept small: encoding frees as it goes.
    const auto run = attn_test::run_attn_measured("compute data/gpt2-tiny --layer 0 --text-file '" + text +
                                                  "' --max-bytes 64M -o '" + dir.path + "/out.npz'", attn_test::small_quarantine);
    CHECK(run.code == 1);
    const auto tokenize = attn_test::run_attn_measured("tokenize data/gpt2-tiny --text-file '" + text + "' --format ids -o '" +
                                                       dir.path + "/ids.txt'", attn_test::small_quarantine);
    CHECK(tokenize.code == 0);
    const double run_mb = static_cast<double>(run.peak_kb) / 1024.0, tokenize_mb = static_cast<double>(tokenize.peak_kb) / 1024.0;
    INFO("compute peaked at " << run_mb << " MB, tokenize at " << tokenize_mb << " MB");
    // The run holds the ids, labels and words of the text beside what tokenize holds, and
    // its checkpoint: within 16 MB of tokenize (it took twice tokenize's memory before).
    CHECK(run_mb <= attn_test::peak_bound_mb(tokenize_mb + 16));
    CHECK(tokenize_mb <= attn_test::peak_bound_mb(0.2 * attn::text_encoding_bytes_per_byte + 32));
}
