// ONNX Attention conformance: the 76 backend node tests of opsets 23/24
// (onnx/onnx@6be0677f, converted to .npy + case.json under tests/fixtures/onnx-attention/)
// and the 11 sliding-window cases of opset 25 (onnx/onnx@f7546912, generated from
// ONNX's own export methods and reference, tests/fixtures/onnx-attention-25/) — copies of
// ../shared/conformance/, so this test needs nothing outside the repository. Each case is run through the real binary with the CLI options that
// express its attributes, and every ONNX output is compared with expected_<output>.npy.
//
// ONNX → attn mapping (see SPEC_SUMMARY.md in the fixture directory):
//   Q K V attn_mask past_key past_value  → --q --k --v --attn-mask --past-key --past-value
//   nonpad_kv_seqlen                     → --lengths (and, with is_causal or a window,
//                                          --causal-align bottom-right: offset = nonpad[b] - Tq)
//   left_window_size right_window_size   → --window LEFT,RIGHT (opset 25)
//   is_causal scale softcap              → --mask causal, --scale, --softcap
//   q_num_heads kv_num_heads (3-D input) → --heads, --kv-heads
//   Y present_key present_value          → output, present_key, present_value
//   qk_matmul_output, mode 0/1 / 2 / 3   → scaled / scores / weights
//   softmax_precision                    → ignored (attn's softmax runs in the compute dtype)

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "scratch_dir.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "attn/tensor.hpp"
#include "array_compare.hpp"
#include "cli_util.hpp"
#include "npz_members.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using attn_test::comparison;
using attn_test::compare_arrays;

/// The two fixture sets and their case counts (each INDEX.md).
struct fixture_set {
    const char* folder;
    std::size_t cases;    // 76: 152 dirs, 76 `_expanded` duplicates skipped; 11 new in opset 25
    std::size_t outputs;  // Y + present_key + present_value + qk_matmul_output
};
constexpr fixture_set onnx_sets[] = {{"onnx-attention", 76, 76 + 20 + 20 + 17}, {"onnx-attention-25", 11, 11 + 1 + 1 + 1}};

std::string fixture_dir(const fixture_set& set) { return std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/" + set.folder; }

/// Names of the case directories (those holding a case.json), sorted.
std::vector<std::string> onnx_case_names(const fixture_set& set) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(fixture_dir(set)))
        if (entry.is_directory() && fs::exists(entry.path() / "case.json"))
            names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

/// Shortest text that reads back as the same double (attributes are float32 values
/// widened to double in case.json, e.g. scale 0.009999999776482582).
std::string exact_number(double x) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", x);
    return buf;
}


attn::array read_npy_file(const std::string& path) { return attn::io::read_npy(attn_test::slurp(path), path); }

/// One case turned into an attn command line, and the stage that answers each ONNX output.
struct onnx_run {
    std::string args;                              // without --dump/--format/-o
    std::map<std::string, std::string> stage_of;   // ONNX output name → attn stage name
    std::map<std::string, std::string> file_of;    // ONNX output name → expected_*.npy
    bool float16 = false;                          // any expected output is float16
    std::vector<std::string> problems;             // case.json entries this mapping does not know
};

onnx_run plan_case(const std::string& dir, const json& meta) {
    static const std::map<std::string, std::string> input_option = {
        {"Q", "--q"}, {"K", "--k"}, {"V", "--v"}, {"attn_mask", "--attn-mask"},
        {"past_key", "--past-key"}, {"past_value", "--past-value"}};
    onnx_run run;
    std::ostringstream args;
    bool has_nonpad = false;
    for (const auto& [key, input] : meta.at("inputs").items()) {
        const std::string name = input.at("schema_name").get<std::string>();
        const std::string path = dir + "/" + input.at("file").get<std::string>();
        if (name == "nonpad_kv_seqlen") {
            const attn::array lengths = read_npy_file(path);
            args << " --lengths ";
            for (std::size_t i = 0; i < lengths.size(); ++i)
                args << (i ? "," : "") << static_cast<std::int64_t>(lengths.value(i));
            has_nonpad = true;
        } else if (const auto it = input_option.find(name); it != input_option.end()) {
            args << " " << it->second << " " << quoted(path);
        } else {
            run.problems.push_back("input " + name);
        }
    }
    int mode = 0;
    long long window_left = -1, window_right = -1;
    bool causal = false;
    const json& attrs = meta.at("attributes");
    for (const auto& [name, value] : attrs.items()) {
        if (name == "is_causal") {
            causal = value.get<int>() != 0;
            if (causal) args << " --mask causal";
        } else if (name == "left_window_size") {
            window_left = value.get<long long>();
        } else if (name == "right_window_size") {
            window_right = value.get<long long>();
        } else if (name == "scale") {
            args << " --scale " << exact_number(value.get<double>());
        } else if (name == "softcap") {
            args << " --softcap " << exact_number(value.get<double>());
        } else if (name == "q_num_heads") {
            args << " --heads " << value.get<int>();
        } else if (name == "kv_num_heads") {
            args << " --kv-heads " << value.get<int>();
        } else if (name == "qk_matmul_output_mode") {
            mode = value.get<int>();
        } else if (name != "softmax_precision") {
            run.problems.push_back("attribute " + name);
        }
    }
    if (window_left != -1 || window_right != -1) args << " --window " << window_left << "," << window_right;
    // The external cache (nonpad_kv_seqlen) places the causal frontier and the window
    // bottom-right on each item's valid keys: p = nonpad[b] - S + i.
    if (has_nonpad && (causal || window_left != -1 || window_right != -1)) args << " --causal-align bottom-right";
    for (const auto& [key, output] : meta.at("outputs").items()) {
        const std::string name = output.at("schema_name").get<std::string>();
        if (output.at("dtype").get<std::string>() == "float16") run.float16 = true;
        run.file_of[name] = dir + "/" + output.at("file").get<std::string>();
        if (name == "Y") run.stage_of[name] = "output";
        else if (name == "present_key" || name == "present_value") run.stage_of[name] = name;
        else if (name == "qk_matmul_output" && mode >= 0 && mode <= 3)
            run.stage_of[name] = mode <= 1 ? "scaled" : mode == 2 ? "scores" : "weights";
        else run.problems.push_back("output " + name + " (qk_matmul_output_mode " + std::to_string(mode) + ")");
    }
    run.args = args.str();
    return run;
}

using attn_test::find_array;

}  // namespace

TEST_CASE("onnx conformance: the fixture directories hold the 76 converted and the 11 opset-25 cases") {
    for (const fixture_set& set : onnx_sets) {
        CAPTURE(set.folder);
        CHECK(onnx_case_names(set).size() == set.cases);
        const json index = json::parse(attn_test::slurp(fixture_dir(set) + "/cases.json"));
        CHECK(index.at("written").get<std::size_t>() == set.cases);
    }
}

TEST_CASE("onnx conformance: every ONNX Attention backend test case matches attn, with either kernel") {
    const attn_test::scratch_dir scratch;
    const std::string tmp = scratch.path + "/onnx.npz";
    for (const fixture_set& set : onnx_sets) {
    std::size_t cases_run = 0, outputs_compared = 0;
    for (const std::string kernel : {"fast", "reference"})
    for (const std::string& name : onnx_case_names(set)) {
        INFO("case " << name << ", --kernel " << kernel);
        const std::string dir = fixture_dir(set) + "/" + name;
        const json meta = json::parse(attn_test::slurp(dir + "/case.json"));
        const onnx_run run = plan_case(dir, meta);
        CHECK_MESSAGE(run.problems.empty(), "unmapped case.json entries, first: "
                                                << (run.problems.empty() ? "" : run.problems.front()));
        if (!run.problems.empty() || run.stage_of.empty()) continue;

        // float32 outputs match a float64 computation within 2.4e-7 (SPEC_SUMMARY); float16
        // outputs are rounded to 11 significant bits (relative step 2^-11 ≈ 4.9e-4), while
        // attn computes float16 inputs in float32 and writes float32.
        const double tol = run.float16 ? 1e-3 : 1e-5;
        std::string dump;
        for (const auto& [output, stage] : run.stage_of) dump += (dump.empty() ? "" : ",") + stage;
        const std::string args =
            "compute" + run.args + " --kernel " + kernel + " --dump " + dump + " --format npz -o " + quoted(tmp);
        INFO("attn " << args);
        std::remove(tmp.c_str());
        const auto r = attn_test::run_attn(args);
        ++cases_run;
        CHECK_MESSAGE(r.code == 0, "exit code " << r.code << ": " << r.err);
        if (r.code != 0) continue;
        const auto got = attn::io::read_npz(attn_test::slurp(tmp), tmp);
        for (const auto& [output, stage] : run.stage_of) {
            INFO("ONNX output " << output << " = attn stage " << stage);
            const attn::array* a = find_array(got, stage);
            CHECK_MESSAGE(a != nullptr, "stage missing from the npz");
            if (a == nullptr) continue;
            const comparison c = compare_arrays(*a, read_npy_file(run.file_of.at(output)), tol, tol);
            CHECK_MESSAGE(c.ok, c.summary);
            ++outputs_compared;
        }
    }
    std::remove(tmp.c_str());
    CAPTURE(set.folder);
    CHECK(cases_run == 2 * set.cases);
    CHECK(outputs_compared == 2 * set.outputs);  // every output of INDEX.md, with both kernels
    }
}
