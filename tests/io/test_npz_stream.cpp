// Streamed .npz/.npy (include/attn/io/npz_stream.hpp, docs/design.md §5.4): byte for byte
// what the held writers (libzip's write_npz, write_npy) give for the whole arrays, in the
// library and through attn compute on checkpoints; a run that fails part way leaves the
// destination as it was.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "attn/io/npz_stream.hpp"
#include "cli_util.hpp"
#include "npz_members.hpp"
#include "scratch_dir.hpp"

namespace {

constexpr auto slab = attn_test::leading_slice;

/// An array of `shape` and `type` whose bytes count up from `seed` (every byte differs
/// between neighbours, so a slab in the wrong place changes the file).
attn::array counting(attn::dtype type, attn::shape_t shape, unsigned seed) {
    attn::array a;
    a.type = type;
    a.shape = std::move(shape);
    a.data.resize(attn::element_count(a.shape) * attn::dtype_size(type));
    for (std::size_t i = 0; i < a.data.size(); ++i) a.data.data()[i] = static_cast<std::byte>((seed + 7 * i) & 0xff);
    if (type == attn::dtype::b1)
        for (std::size_t i = 0; i < a.data.size(); ++i) a.data.data()[i] = static_cast<std::byte>(i % 3 == 0);
    return a;
}

/// The arrays streamed layer by layer (slab i of each, then slab i + 1).
std::string streamed(const std::vector<attn::named_array>& arrays, bool npy) {
    std::stringstream out;
    std::vector<attn::io::streamed_array> plan;
    for (const auto& a : arrays) plan.push_back({a.name, a.value.type, a.value.shape});
    attn::io::npz_stream s(out, plan, npy);
    for (std::size_t i = 0; i < arrays.front().value.shape[0]; ++i)
        for (std::size_t m = 0; m < arrays.size(); ++m) s.append(m, slab(arrays[m].value, i));
    s.finish();
    return out.str();
}

std::string held(const std::vector<attn::named_array>& arrays) {
    std::ostringstream out;
    attn::io::write_npz(out, arrays);
    return out.str();
}

}  // namespace

TEST_CASE("npz_stream: byte for byte write_npz and write_npy, slab by slab") {
    using attn::dtype;
    const std::vector<attn::named_array> arrays{{"x", counting(dtype::f4, {3, 2, 5}, 1)},
                                                {"weights", counting(dtype::f8, {3, 4, 2, 2}, 2)},
                                                {"mask", counting(dtype::b1, {3, 2, 2}, 3)},
                                                {"stats.argmax", counting(dtype::i8, {3, 2}, 4)},
                                                {"scores", counting(dtype::f2, {3, 1, 1}, 5)},
                                                {"head_stats.entropy", counting(dtype::f8, {3}, 6)}};
    CHECK(streamed(arrays, false) == held(arrays));
    // Each count of members, and a leading axis of one.
    for (std::size_t n = 1; n <= arrays.size(); ++n) {
        CAPTURE(n);
        const std::vector<attn::named_array> some(arrays.begin(), arrays.begin() + static_cast<std::ptrdiff_t>(n));
        CHECK(streamed(some, false) == held(some));
    }
    const std::vector<attn::named_array> one_layer{{"weights", counting(dtype::f4, {1, 4, 8, 8}, 9)}, {"x", counting(dtype::f8, {1, 8, 32}, 10)}};
    CHECK(streamed(one_layer, false) == held(one_layer));
    // A header past 64 KiB (npy 2.0) is not at stake here; a long one (many axes) is.
    const std::vector<attn::named_array> deep{{"deep", counting(dtype::f4, {2, 1, 1, 1, 1, 1, 1, 1, 3}, 11)}};
    CHECK(streamed(deep, false) == held(deep));
    // .npy: the one array as write_npy writes it.
    std::ostringstream npy;
    attn::io::write_npy(npy, arrays[1].value);
    CHECK(streamed({arrays[1]}, true) == npy.str());
    // What numpy.load needs, read back by attn's own reader.
    const std::string bytes = streamed(arrays, false);
    const auto back = attn::io::read_npz(bytes, "streamed.npz");
    REQUIRE(back.size() == arrays.size());
    for (std::size_t m = 0; m < arrays.size(); ++m) {
        CHECK(back[m].name == arrays[m].name);
        CHECK(back[m].value.shape == arrays[m].value.shape);
        CHECK(back[m].value.data == arrays[m].value.data);
    }
}

TEST_CASE("npz_stream refusals: npy of several arrays, a slab that does not continue, an unfinished array") {
    using attn::dtype;
    std::stringstream out;
    CHECK_THROWS_WITH_AS(attn::io::npz_stream(out, {{"a", dtype::f4, {2, 3}}, {"b", dtype::f4, {2}}}, true),
                         "--format: npy holds one tensor; pick one stage with --dump (expected 1 stage, got 2)", attn::usage_error);
    attn::io::npz_stream s(out, {{"a", dtype::f4, {2, 3}}}, false);
    CHECK_THROWS_WITH_AS(s.append(0, counting(dtype::f4, {4}, 0)),
                         "a: does not continue its streamed array (expected (3,) float32, slab 0 of 2, got (4,) float32)", attn::shape_error);
    s.append(0, counting(dtype::f4, {3}, 0));
    CHECK_THROWS_WITH_AS(s.finish(), "a: streamed in part (expected 2 slabs, got 1)", attn::shape_error);
    s.append(0, counting(dtype::f4, {3}, 1));
    CHECK_THROWS_WITH_AS(s.append(0, counting(dtype::f4, {3}, 2)),
                         "a: does not continue its streamed array (expected (3,) float32, slab 2 of 2, got (3,) float32)", attn::shape_error);
    CHECK_NOTHROW(s.finish());
}

TEST_CASE("attn compute CHECKPOINT -o FILE.npz streams: the same bytes as the held output on stdout") {
    const std::vector<std::string> runs{
        "tests/fixtures/checkpoints/gemma3-tiny --layer all --ids 1,5,9,2,7,3,8,4 --dump weights,output",
        "tests/fixtures/checkpoints/gemma3-tiny --layer 0,2-3 --ids 1,5,9,2,7,3,8,4 --dump x,x_norm,q,k,v,qk,scaled,scores,weights,output,lse,stats,head_stats,mask --dtype float64",
        "tests/fixtures/checkpoints/qwen3-tiny --layer all --ids 1,5,9,2 --dump q_proj,k_proj,weights --average-heads",
        "tests/fixtures/checkpoints/qwen3-tiny --layer 1-2 --ids 1,5,9,2 --dump weights,scores --store bfloat16",
        "data/llama-tiny --layer all --token-ids tests/fixtures/checkpoints/bert-tiny/expected-padded.npz:attention_mask --dump weights,x",
        "data/gpt2-tiny --layer all --ids 11,12,13 --dump weights --format npy",
        "data/gpt2-tiny --layer 1 --ids 11,12,13 --dump weights,output",  // one layer: held, as before
    };
    attn_test::scratch_dir dir;
    for (const std::string& args : runs) {
        CAPTURE(args);
        const bool npy = args.find("--format npy") != std::string::npos;
        const std::string format = npy ? "" : " --format npz";
        const auto on_stdout = attn_test::run_attn("compute " + args + format);
        REQUIRE_MESSAGE(on_stdout.code == 0, on_stdout.err);
        const std::string file = dir.path + (npy ? "/out.npy" : "/out.npz");
        const auto to_file = attn_test::run_attn("compute " + args + format + " -o '" + file + "'");
        REQUIRE_MESSAGE(to_file.code == 0, to_file.err);
        CHECK(to_file.out.empty());
        CHECK(attn_test::slurp(file) == on_stdout.out);
    }
    // The batch mask is what makes this run's shapes (B, …): make sure it was one.
    const auto arrays = attn::io::read_npz(attn_test::slurp(dir.path + "/out.npz"), "out.npz");
    REQUIRE(!arrays.empty());
}

TEST_CASE("a streamed run that fails part way leaves the destination as it was, and no temporary") {
    attn_test::scratch_dir dir;
    const std::string out = dir.path + "/out.npz";
    attn_test::spit(out, "before");
    // x of 4 layers, 1 KiB each: `ulimit -f 3` (KiB for bash) lets layers 0 and 1 through
    // and fails layer 2's slab with EFBIG once SIGXFSZ is ignored.
    auto r = attn_test::run_attn("compute tests/fixtures/checkpoints/gemma3-tiny --layer all --ids 1,5,9,2,7,3,8,4 --dump x -o '" + out + "'", "",
                                 "trap '' XFSZ && ulimit -f 3 && ");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + out + ": cannot write output (File too large)\n");
    CHECK(attn_test::slurp(out) == "before");
    CHECK(std::distance(std::filesystem::directory_iterator(dir.path), std::filesystem::directory_iterator{}) == 1);
    // Refused at the first layer (npy holds one stage): nothing written either.
    r = attn_test::run_attn("compute tests/fixtures/checkpoints/gemma3-tiny --layer all --ids 1,5 --dump x,weights --format npy -o '" + dir.path + "/out.npy'");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --format: npy holds one tensor; pick one stage with --dump (expected 1 stage, got 2)\n");
    CHECK_FALSE(std::filesystem::exists(dir.path + "/out.npy"));
    CHECK(attn_test::slurp(out) == "before");
    CHECK(std::distance(std::filesystem::directory_iterator(dir.path), std::filesystem::directory_iterator{}) == 1);
    // And the same run under no limit replaces it.
    r = attn_test::run_attn("compute tests/fixtures/checkpoints/gemma3-tiny --layer all --ids 1,5,9,2,7,3,8,4 --dump x -o '" + out + "'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(attn::io::read_npz(attn_test::slurp(out), out).front().value.shape == attn::shape_t{4, 8, 32});
}

TEST_CASE("a streamed run holds one layer: peak memory of --layer all --dump weights at T = 2048") {
    attn_test::scratch_dir dir;
    // gemma3-tiny: 4 layers of 4 heads × 2048² float32 weights, 64 MiB each. Held, they
    // took 550 MB (the layers, their stack and the archive built in memory); streamed, 93 MB.
    attn_test::write_cycled_ids(dir.path + "/ids.npy", 2048);
    const auto m = attn_test::run_attn_measured("compute tests/fixtures/checkpoints/gemma3-tiny --layer all --token-ids '" + dir.path +
                                                "/ids.npy' --dump weights -o '" + dir.path + "/out.npz'");
    REQUIRE_MESSAGE(m.code == 0, "the run failed");
    const long peak_kb = m.peak_kb;
    CHECK(peak_kb < attn_test::peak_bound_mb(200) * 1024);  // KiB; four layers held would pass 256 MiB of weights alone
    CHECK(std::filesystem::file_size(dir.path + "/out.npz") > 4 * 64 * 1024 * 1024);
}
