// attn compute CHECKPOINT --layer 0,5,10-12 (docs/design.md §5.4): the listed layers, stacked
// in ascending order, are bitwise the same slices of a --layer all run, from ids and from
// --x entering the first listed layer; meta names the layers; each refusal has its one line.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "cli_util.hpp"
#include "refusals.hpp"
#include "npz_members.hpp"
#include "scratch_dir.hpp"

namespace {

using attn_test::refused;
constexpr auto slice = attn_test::leading_slice;

const std::string gemma3 = "tests/fixtures/checkpoints/gemma3-tiny/model.safetensors";  // 4 layers, sliding and full
const std::string qwen3 = "tests/fixtures/checkpoints/qwen3-tiny/model.safetensors";    // 3 layers, q/k norms
const std::string ids = " --ids 1,5,9,2,7,3,8,4";
const std::string stages = " --dump x,x_norm,q_proj,q,k,v,scores,weights,output";

std::vector<attn::named_array> run_npz(const std::string& args, const std::string& path) {
    CAPTURE(args);
    const auto r = attn_test::run_attn("compute " + args + " --format npz -o '" + path + "'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    return attn_test::read_npz_file(path);
}

/// Every member of `got` (layers `listed`, stacked) is bitwise the slices of `all`.
void check_slices(const std::vector<attn::named_array>& got, const std::vector<attn::named_array>& all,
                  const std::vector<std::size_t>& listed) {
    REQUIRE(got.size() == all.size());
    for (std::size_t m = 0; m < got.size(); ++m) {
        CAPTURE(got[m].name);
        REQUIRE(got[m].name == all[m].name);
        const attn::array& a = got[m].value;
        REQUIRE(a.shape.size() == all[m].value.shape.size());
        CHECK(a.shape[0] == listed.size());
        CHECK(a.type == all[m].value.type);
        for (std::size_t i = 0; i < listed.size(); ++i) {
            CAPTURE(listed[i]);
            const attn::array want = slice(all[m].value, listed[i]);
            const attn::array have = slice(a, i);
            CHECK(have.shape == want.shape);
            CHECK(have.data == want.data);  // bitwise: the same blocks ran on the same stream
        }
    }
}

}  // namespace

TEST_CASE("--layer lists: the listed layers are bitwise the slices of --layer all, from ids, in both dtypes") {
    attn_test::scratch_dir dir;
    for (const std::string model : {gemma3, qwen3}) {
        for (const std::string dtype : {"float64", "float32"}) {
            CAPTURE(model);
            CAPTURE(dtype);
            const std::string common = model + ids + stages + " --dtype " + dtype;
            const auto all = run_npz(common + " --layer all", dir.path + "/all.npz");
            const bool four = model == gemma3;
            // Order and ranges as given do not matter: the stack is ascending.
            const std::vector<std::pair<std::string, std::vector<std::size_t>>> lists =
                four ? std::vector<std::pair<std::string, std::vector<std::size_t>>>{{"0,2-3", {0, 2, 3}}, {"3,1", {1, 3}}, {"2-2", {2}}, {"0-3", {0, 1, 2, 3}}}
                     : std::vector<std::pair<std::string, std::vector<std::size_t>>>{{"0,2", {0, 2}}, {"1-2", {1, 2}}};
            for (const auto& [text, listed] : lists) {
                CAPTURE(text);
                check_slices(run_npz(common + " --layer " + text, dir.path + "/list.npz"), all, listed);
            }
            // --layer N: the same slice, without the axis. Earlier blocks run with the
            // stages dumped, as --layer all's do (float32's kernel path depends on them).
            const std::size_t N = four ? 3 : 2;
            const auto one = run_npz(common + " --layer " + std::to_string(N), dir.path + "/one.npz");
            REQUIRE(one.size() == all.size());
            for (std::size_t m = 0; m < one.size(); ++m) {
                CAPTURE(one[m].name);
                const attn::array want = slice(all[m].value, N);
                CHECK(one[m].value.shape == want.shape);
                CHECK(one[m].value.data == want.data);
            }
        }
    }
}

TEST_CASE("--layer lists with --x: X enters the first listed layer, the blocks between listed layers run") {
    attn_test::scratch_dir dir;
    for (const std::string dtype : {"float64", "float32"}) {
        CAPTURE(dtype);
        const std::string common = gemma3 + stages + " --dtype " + dtype;
        const auto all = run_npz(common + ids + " --layer all", dir.path + "/all.npz");
        // HF hidden_states[1] as the run itself computed it: the residual stream entering layer 1.
        {
            std::ofstream f(dir.path + "/x.npz", std::ios::binary);
            attn::io::write_npz(f, {{"x", slice(attn_test::member(all, "x"), 1)}});
        }
        check_slices(run_npz(common + " --layer 1,3 --x '" + dir.path + "/x.npz:x'", dir.path + "/list.npz"), all, {1, 3});
        check_slices(run_npz(common + " --layer 1-3 --x '" + dir.path + "/x.npz:x'", dir.path + "/list.npz"), all, {1, 2, 3});
        // The same X entering layer 1 is not layer 0's: a list starting elsewhere differs.
        const auto wrong = run_npz(common + " --layer 2,3 --x '" + dir.path + "/x.npz:x'", dir.path + "/wrong.npz");
        CHECK(slice(attn_test::member(wrong, "weights"), 0).data != slice(attn_test::member(all, "weights"), 2).data);
    }
}

TEST_CASE("--layer lists: meta names the layers, N alone has no layer axis, CSV and tables use the model's layers") {
    using nlohmann::json;
    auto r = attn_test::run_attn("compute " + gemma3 + ids + " --layer 3,0 --dump weights,x");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    json j = json::parse(r.out);
    CHECK(j.at("meta").at("model").at("layer") == json{0, 3});
    CHECK(j.at("meta").at("model").at("layers") == 4);
    CHECK(j.at("meta").at("shapes") == json{{"weights", {2, 4, 8, 8}}, {"x", {2, 8, 32}}});
    r = attn_test::run_attn("compute " + gemma3 + ids + " --layer 3 --dump weights,x");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    j = json::parse(r.out);
    CHECK(j.at("meta").at("model").at("layer") == 3);
    CHECK(j.at("meta").at("shapes") == json{{"weights", {4, 8, 8}}, {"x", {8, 32}}});
    // A range of one is a list: it keeps the axis.
    r = attn_test::run_attn("compute " + gemma3 + ids + " --layer 3-3 --dump weights");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(json::parse(r.out).at("meta").at("shapes") == json{{"weights", {1, 4, 8, 8}}});
    CHECK(json::parse(r.out).at("meta").at("model").at("layer") == json{3});
    // CSV's layer column and the table's block labels are the model's layers, not indices.
    r = attn_test::run_attn("compute " + gemma3 + " --ids 1,2 --layer 1,3 --dump weights --format csv");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(r.out.rfind("tensor,layer,batch,head,row,col,value\nweights,1,0,0,0,0,", 0) == 0);
    CHECK(r.out.find("\nweights,3,0,3,1,1,") != std::string::npos);
    CHECK(r.out.find("\nweights,0,") == std::string::npos);
    r = attn_test::run_attn("compute " + gemma3 + " --ids 1,2 --layer 1,3 --dump weights --format table");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(r.out.find("layer 3, head 0") != std::string::npos);
    CHECK(r.out.find("layer 0,") == std::string::npos);
}

TEST_CASE("--layer list refusals: one line, exit 2, naming the flag") {
    refused(gemma3 + ids + " --layer 0,,2", 2, "--layer: an empty item in the list (expected layers separated by single commas, got 0,,2)");
    refused(gemma3 + ids + " --layer 0,", 2, "--layer: an empty item in the list (expected layers separated by single commas, got 0,)");
    refused(gemma3 + ids + " --layer 3-1", 2, "--layer: a descending range (expected A-B with A ≤ B, got 3-1)");
    refused(gemma3 + ids + " --layer 0-2,2", 2, "--layer: layer 2 listed twice (expected each layer once, got 0-2,2)");
    refused(gemma3 + ids + " --layer 0-18446744073709551615", 2,
            "--layer: more layers than any model has (expected at most 65536 layers, got 0-18446744073709551615)");
    refused(gemma3 + ids + " --layer 1,4", 2, "--layer: beyond the model's layers (expected 0 to 3 or all, got 4)");
    const std::string garbage = "--layer: not a layer (expected a number ≥ 0, a range A-B, a list of them such as 0,5,10-12, or all, got ";
    for (const std::string text : {"x", "1-", "-1", "all,1", "1;2", "1 2", "1-2-3", "+1"}) refused(gemma3 + ids + " --layer '" + text + "'", 2, garbage + text + ")");
    refused(gemma3 + ids + " --layer 0,2 --dump rollout", 2,
            "--dump: rollout multiplies every layer's weights from layer 0 (expected --layer all, got --layer 0,2)");
    refused(gemma3 + ids + " --layer 0-3 --dump weights,rollout", 2,
            "--dump: rollout multiplies every layer's weights from layer 0 (expected --layer all, got --layer 0-3)");
}

TEST_CASE("--layer lists in a manifest job, and plot and view of their output") {
    using nlohmann::json;
    attn_test::scratch_dir dir;
    const std::string source = std::string(ATTN_SOURCE_DIR) + "/";
    attn_test::spit(dir.path + "/jobs.jsonl",
                    json{{"input", source + gemma3}, {"layer", "2,0"}, {"ids", "1,5,9,2"}, {"dump", "weights"}}.dump() + "\n");
    auto r = attn_test::run_attn("compute --manifest '" + dir.path + "/jobs.jsonl'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const json job = json::parse(r.out);
    r = attn_test::run_attn("compute " + gemma3 + " --layer 0,2 --ids 1,5,9,2 --dump weights");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const json direct = json::parse(r.out);
    CHECK(job.at("weights") == direct.at("weights"));
    CHECK(job.at("meta").at("model").at("layer") == json{0, 2});
    attn_test::spit(dir.path + "/bad.jsonl", json{{"input", source + gemma3}, {"layer", "2-0"}, {"ids", "1,2"}}.dump() + "\n");
    r = attn_test::run_attn("compute --manifest '" + dir.path + "/bad.jsonl'");
    CHECK(r.code != 0);
    CHECK(r.err.find("--layer: a descending range (expected A-B with A ≤ B, got 2-0)") != std::string::npos);

    // attn plot on that output: --layer N is the model's layer N, which must be listed.
    attn_test::spit(dir.path + "/list.json", direct.dump());
    // (Index 2 is past the axis of two layers: only the model's layer 2 draws.)
    r = attn_test::run_attn("plot '" + dir.path + "/list.json' --layer 2 -o '" + dir.path + "/two.svg'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    r = attn_test::run_attn("plot '" + dir.path + "/list.json' --layer 1 -o '" + dir.path + "/one.svg'");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --layer: not a layer of " + dir.path +
                       "/list.json (expected one of the layers it was computed for, 0,2, or last or -K, got 1)\n");
    r = attn_test::run_attn("plot '" + dir.path + "/list.json' --layer 0,2 -o '" + dir.path + "/one.svg'");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --layer: picks the one layer to draw (expected N, last or -K, got 0,2)\n");
    // The same picture as the single-layer run draws, by number and by position.
    r = attn_test::run_attn("plot '" + dir.path + "/list.json' --layer last -o '" + dir.path + "/last.svg'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    r = attn_test::run_attn("plot " + gemma3 + " --layer 2 --ids 1,5,9,2 -o '" + dir.path + "/direct.svg'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(attn_test::slurp(dir.path + "/two.svg") == attn_test::slurp(dir.path + "/direct.svg"));
    CHECK(attn_test::slurp(dir.path + "/last.svg") == attn_test::slurp(dir.path + "/direct.svg"));
    r = attn_test::run_attn("plot '" + dir.path + "/list.json' -o '" + dir.path + "/first.svg'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(attn_test::slurp(dir.path + "/first.svg") != attn_test::slurp(dir.path + "/direct.svg"));
    // attn view names the listed layers and shows no rollout (a product that would skip blocks).
    r = attn_test::run_attn("view '" + dir.path + "/list.json' -o '" + dir.path + "/v.html'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    const std::string page = attn_test::slurp(dir.path + "/v.html");
    CHECK(page.find("\"layer_names\":[0,2]") != std::string::npos);
    CHECK(page.find("\"name\":\"rollout\"") == std::string::npos);
}

TEST_CASE("a model split across two runs (--layer 0-2, then --x of layer 2 and --layer 2-3) joins into --layer all, bit for bit") {
    // docs/checkpoints.md's "a model's layers on several machines": the first run dumps x, whose
    // entry 2 is the stream entering layer 2; the second starts there. Both dump the same
    // stages as the whole run (every block's kernel path follows --dump).
    attn_test::scratch_dir dir;
    const std::string dump = " --dump weights,x";
    const auto all = run_npz(gemma3 + ids + " --layer all" + dump, dir.path + "/all.npz");
    const auto first = run_npz(gemma3 + ids + " --layer 0-2" + dump, dir.path + "/first.npz");
    const attn::array x2 = slice(attn_test::member(first, "x"), 2);
    {
        std::ofstream f(dir.path + "/x2.npy", std::ios::binary);
        attn::io::write_npy(f, x2);
    }
    const auto second = run_npz(gemma3 + " --x '" + dir.path + "/x2.npy' --layer 2-3" + dump, dir.path + "/second.npz");
    for (const char* stage : {"weights", "x"}) {
        CAPTURE(stage);
        const attn::array& whole = attn_test::member(all, stage);
        REQUIRE(attn_test::member(second, stage).shape[0] == 2);
        for (std::size_t l = 0; l < 4; ++l) {
            CAPTURE(l);
            const attn::array part = l < 2 ? slice(attn_test::member(first, stage), l) : slice(attn_test::member(second, stage), l - 2);
            CHECK(part.shape == slice(whole, l).shape);
            CHECK(part.data == slice(whole, l).data);
        }
    }
}
