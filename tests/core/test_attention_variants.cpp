// Independent references for RoPE variants, local windows, ALiBi, packed documents and
// sinks: tests/fixtures/attention-variants/, written by
// scripts/make_attention_variant_fixtures.py in PyTorch from HF transformers (rotate_half),
// GPT-J (rotate_every_two), FlashAttention's tests (construct_local_mask), the ALiBi paper
// (get_slopes), separate runs of packed documents and gpt-oss's sdpa with sinks. Each case
// runs through the binary with its cases.json options, with both kernels, and once with
// every expected stage (the materialised path) and once with the output only (streaming).
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "scratch_dir.hpp"
#include "array_compare.hpp"
#include "attn/io/npz.hpp"
#include "cli_util.hpp"

TEST_CASE("attention variants: RoPE, FlashAttention windows, ALiBi, packed documents and sinks match their references") {
    using nlohmann::json;
    const std::string dir = std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/attention-variants";
    const json index = json::parse(attn_test::slurp(dir + "/cases.json"));
    const attn_test::scratch_dir scratch;
    const std::string out = scratch.path + "/attention-variants.npz";
    std::size_t compared = 0;
    for (const json& c : index.at("cases")) {
        const std::string name = c.at("name"), file = dir + "/" + name + ".npz";
        CAPTURE(name);
        const auto fixture = attn::io::read_npz(attn_test::slurp(file), file);
        std::string options;
        for (const json& o : c.at("options")) options += " '" + o.get<std::string>() + "'";
        std::string all;
        for (const json& s : c.at("stages")) all += (all.empty() ? "" : ",") + s.get<std::string>();
        for (const std::string kernel : {"fast", "reference"})
            for (const std::string dump : {all, std::string("output")}) {
                CAPTURE(kernel);
                CAPTURE(dump);
                std::remove(out.c_str());
                const auto r = attn_test::run_attn("compute '" + file + "'" + options + " --kernel " + kernel +
                                                   " --dtype float64 --dump " + dump + " --format npz -o '" + out + "'");
                REQUIRE_MESSAGE(r.code == 0, r.err);
                const auto got = attn::io::read_npz(attn_test::slurp(out), out);
                for (const auto& g : got) {
                    const attn::array* want = nullptr;
                    for (const auto& f : fixture)
                        if (f.name == "expected_" + g.name) want = &f.value;
                    REQUIRE_MESSAGE(want != nullptr, "no expected_" << g.name);
                    CAPTURE(g.name);
                    const auto cmp = attn_test::compare_arrays(g.value, *want, 1e-10, 1e-12);
                    CHECK_MESSAGE(cmp.ok, cmp.summary);
                    ++compared;
                }
            }
    }
    std::remove(out.c_str());
    CHECK(index.at("cases").size() == 12);
    CHECK(compared >= 12 * 4);
}
