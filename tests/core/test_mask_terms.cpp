// The mask terms (docs/design.md §3.1 item 1): a convention is one header under
// include/attn/core/masks/, which the build lists (mask_terms.hpp); mask_settings,
// mask<T>, the build order and what meta records are made from that list alone.
// tests/check_mask_terms.cmake shows the list refuses an unmarked, misnamed or duplicated
// term; here the list is checked against the folder and what it makes is checked.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "attn/core/masks.hpp"
#include "mask_arrays.hpp"

using namespace attn::core;

TEST_CASE("mask terms: every header of include/attn/core/masks/ is a listed term") {
    // A header the build's list missed would define a convention nothing builds.
    const std::vector<std::string> listed(std::begin(masks::term_files), std::end(masks::term_files));
    std::size_t files = 0;
    for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(ATTN_SOURCE_DIR) / "include/attn/core/masks")) {
        ++files;
        CAPTURE(e.path().string());
        CHECK(e.path().extension() == ".hpp");
        CHECK(std::find(listed.begin(), listed.end(), e.path().stem().string()) != listed.end());
    }
    CHECK(files == listed.size());
    CHECK(masks::terms::size == listed.size());
    CHECK(std::set<std::string>(listed.begin(), listed.end()).size() == listed.size());
}

TEST_CASE("mask terms: mask_settings and mask<T> are made of every listed term's settings and state") {
    std::size_t n = 0;
    masks::terms::for_each([&](auto t) {
        using term = decltype(t);
        ++n;
        CHECK(std::is_base_of_v<typename term::settings, mask_settings>);
        CHECK(std::is_base_of_v<typename term::template state<float>, mask<float>>);
        CHECK(std::is_base_of_v<typename term::template state<double>, mask<double>>);
    });
    CHECK(n == masks::terms::size);
    // An attention call holds its mask settings as a member (docs/design.md §3.1 item 1),
    // not as a base: a call's fields and a mask's stay apart.
    CHECK(std::is_same_v<decltype(attention_call::mask), mask_settings>);
    CHECK_FALSE(std::is_base_of_v<mask_settings, attention_call>);
    // Each term's any() reaches mask<T>::any(): one term's state alone makes it true.
    mask<double> m;
    CHECK_FALSE(m.any());
    m.window_right = 0;
    CHECK(m.any());
    m = mask<double>{};
    m.document = {0, 1};
    CHECK(m.any());
}

TEST_CASE("mask terms: build order gives the order of meta's mask list and of the terms' meta entries") {
    mask_spec s;
    s.B = 1, s.Hq = 2, s.Tq = 4, s.Tk = 4;
    s.causal = true;
    s.window_left = 2, s.window_right = 1;
    s.prefix_len = {1};
    s.sink_tokens = 1;
    s.alibi = true;
    s.lengths = {3};
    s.pad_id = 0;
    const attn::array ids = attn_test::ints({4}, {5, 6, 0, 7});
    s.token_ids = &ids;
    std::vector<std::string> used;
    const mask<double> m = build_mask<double>(s, used);
    CHECK(used == std::vector<std::string>{"causal", "window", "prefix", "sink_tokens", "alibi", "padding"});

    const std::vector<mask_record> records = mask_records(s, m);
    std::vector<std::string> keys;
    std::vector<int> places;
    for (const auto& r : records) keys.push_back(r.key), places.push_back(r.place);
    // Build order (lengths, key_flags, positions, …); meta writes them by place.
    CHECK(keys == std::vector<std::string>{"lengths", "pad_id", "causal_align", "window", "prefix_len", "sink_tokens",
                                           "alibi_slopes"});
    CHECK(places == std::vector<int>{70, 80, 10, 20, 30, 40, 60});
    CHECK(std::get<std::string>(records[2].value) == "top-left");
    CHECK(std::get<std::vector<long long>>(records[3].value) == std::vector<long long>{2, 1});
    CHECK(std::get<std::vector<double>>(records[6].value) == alibi_slopes(2));
    CHECK(std::get<long long>(records[1].value) == 0);

    // Nothing asked for: nothing recorded.
    mask_spec none;
    none.Tq = none.Tk = 2;
    CHECK(mask_records(none, build_mask<double>(none, used)).empty());
}
