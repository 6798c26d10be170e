// plan_output (attn/io/output_plan.hpp, docs/design.md §5.4): which runs are written whole and
// which layer by layer, in which mode, and where the text formats spool.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "attn/error.hpp"
#include "attn/io/formats.hpp"
#include "attn/io/output_plan.hpp"
#include "scratch_dir.hpp"

namespace {

attn::io::output_plan plan(const std::string& format, const std::string& destination, bool layer_list = true,
                           bool plot = false, bool rollout = false, bool average_heads = false) {
    return attn::io::plan_output({destination, attn::io::parse_format(format), layer_list, plot, rollout, average_heads});
}

}  // namespace

TEST_CASE("output plan: a run of listed or all layers streams in its format's way, --layer N is written whole") {
    using attn::io::output_mode;
    attn_test::scratch_dir dir;
    const std::string file = dir.path + "/out";
    CHECK(plan("jsonl", "").mode == output_mode::layer_lines);
    CHECK(plan("jsonl", file).mode == output_mode::layer_lines);
    CHECK(plan("html", file).mode == output_mode::page_stream);
    CHECK(plan("html", "-").mode == output_mode::page_stream);  // a page goes anywhere, in order
    CHECK(plan("npz", file).mode == output_mode::layer_stream);
    CHECK(plan("npy", file).mode == output_mode::layer_stream);
    CHECK(plan("csv", file).mode == output_mode::layer_stream);
    CHECK(plan("json", file).mode == output_mode::layer_stream);
    CHECK(plan("table", file).mode == output_mode::whole);
    for (const char* f : {"jsonl", "html", "npz", "npy", "csv", "json", "table"}) {
        CAPTURE(f);
        CHECK(plan(f, file, false).mode == output_mode::whole);
    }
}

TEST_CASE("output plan: what needs the held run, or a file to seek in, is written whole") {
    using attn::io::output_mode;
    attn_test::scratch_dir dir;
    const std::string file = dir.path + "/out";
    // .npz and .npy place each layer's slab by seeking: not into stdout, a device or a pipe.
    CHECK(plan("npz", "").mode == output_mode::whole);
    CHECK(plan("npz", "-").mode == output_mode::whole);
    CHECK(plan("npy", "/dev/stdout").mode == output_mode::whole);
    CHECK(plan("npz", "/dev/null").mode == output_mode::whole);
    // --plot draws from the held weights; rollout is made after the last layer.
    CHECK(plan("npz", file, true, true).mode == output_mode::whole);
    CHECK(plan("csv", file, true, false, true).mode == output_mode::whole);
    CHECK(plan("html", file, true, true).mode == output_mode::whole);
    // The page of averaged heads is drawn by the held run.
    CHECK(plan("html", file, true, false, false, true).mode == output_mode::whole);
    CHECK(plan("npz", file, true, false, false, true).mode == output_mode::layer_stream);
}

TEST_CASE("output plan: text spools sit beside a file, in the temporary directory otherwise") {
    attn_test::scratch_dir dir;
    const std::string file = dir.path + "/out.csv";
    CHECK(plan("csv", file).spools_beside == file);
    const std::string temp = (std::filesystem::temp_directory_path() / "attn-output").string();
    CHECK(plan("csv", "").spools_beside == temp);
    CHECK(plan("json", "/dev/null").spools_beside == temp);
    CHECK(plan("json", "/dev/null").mode == attn::io::output_mode::layer_stream);
}

TEST_CASE("output plan: rollout in JSON Lines is refused, naming --dump") {
    try {
        plan("jsonl", "", true, false, true);
        FAIL("no usage_error");
    } catch (const attn::usage_error& e) {
        CHECK(std::string(e.what()) == "--dump: rollout multiplies every layer's weights, and JSON Lines hold one layer a line "
                                       "(expected --format json, csv or npz, got jsonl)");
    }
    // With --layer N the one layer is one line: no refusal.
    CHECK(plan("jsonl", "", false, false, true).mode == attn::io::output_mode::whole);
}
