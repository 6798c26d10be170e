// The base floor's text helpers (include/attn/text.hpp): lists as messages write them,
// numbers as %g, UTF-8 sequence lengths.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "attn/text.hpp"

TEST_CASE("listed: a, b or c, the last two joined by `last`") {
    using v = std::vector<std::string>;
    CHECK(attn::listed(v{}) == "");
    CHECK(attn::listed(v{"json"}) == "json");
    CHECK(attn::listed(v{"npy", "npz"}) == "npy or npz");
    CHECK(attn::listed(v{"jsonl", "json", "csv"}) == "jsonl, json or csv");
    CHECK(attn::listed(v{".npy", ".npz"}, " and ") == ".npy and .npz");
}

TEST_CASE("general_number: printf's %g in the C locale") {
    CHECK(attn::general_number(0.5) == "0.5");
    CHECK(attn::general_number(1e30) == "1e+30");
    CHECK(attn::general_number(1.0 / 3.0, 3) == "0.333");
}

TEST_CASE("utf8_sequence_length: well-formed sequences and Table 3-7's refusals") {
    CHECK(attn::utf8_sequence_length("a", 0) == 1);
    CHECK(attn::utf8_sequence_length("\xc3\xa9", 0) == 2);
    CHECK(attn::utf8_sequence_length("\xe2\x82\xac", 0) == 3);
    CHECK(attn::utf8_sequence_length("\xf0\x9f\x98\x80", 0) == 4);
    CHECK(attn::utf8_sequence_length("\x80", 0) == 0);          // a stray continuation byte
    CHECK(attn::utf8_sequence_length("\xc0\xaf", 0) == 0);      // overlong
    CHECK(attn::utf8_sequence_length("\xed\xa0\x80", 0) == 0);  // a surrogate
    CHECK(attn::utf8_sequence_length("\xf4\x90\x80\x80", 0) == 0);  // beyond U+10FFFF
}
