#pragma once
// One checkpoint case against its independent reference (docs/design.md §4.3, §5.2): a
// tiny checkpoint and expected.npz written by a scripts/make_*_fixtures.py in PyTorch from
// Hugging Face transformers' modeling code, sharing nothing with attn. check_checkpoint_case
// runs it through the binary: every layer from the ids (x, x_norm, weights, output with a
// leading layer axis; q and k after RoPE where the reference keeps them) in float64 and
// float32, layer 1 from its residual stream (--x) and from the ids, the rollout, and the
// output alone (the streaming path) with both kernels. A family's test file lists its cases.
// expected.npz: ids (T,), hidden_states (L+1, T, E), x_layer1 (T, E), x_norm (L, T, E),
// weights (L, H, T, T), output (L, T, E), rollout (T, T), optionally q and k.
#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "array_compare.hpp"
#include <nlohmann/json.hpp>

#include "attn/io/npz.hpp"
#include "cli_util.hpp"
#include "npz_members.hpp"
#include "scratch_dir.hpp"

namespace attn_test {

/// A checkpoint, its reference and the options every run of it takes.
struct checkpoint_case {
    std::string name;
    std::string checkpoint;  // relative to the source directory
    std::string expected;    // expected.npz
    std::string options;     // extra options
};

inline const std::string checkpoint_fixtures = "tests/fixtures/checkpoints/";

/// A copy of test checkpoint `name`'s config.json (under checkpoint_fixtures) edited by
/// `edit` (a callable taking nlohmann::json&), written into `dir`: the arguments that read
/// the checkpoint's model.safetensors with the copy (`… --config '<copy>'`).
template <class Edit>
std::string edited_config(const scratch_dir& dir, const std::string& name, Edit edit) {
    nlohmann::json cfg = nlohmann::json::parse(slurp(std::string(ATTN_SOURCE_DIR) + "/" + checkpoint_fixtures + name + "/config.json"));
    edit(cfg);
    const std::string path = dir.path + "/" + name + ".json";
    spit(path, cfg.dump());
    return checkpoint_fixtures + name + "/model.safetensors --config '" + path + "'";
}

/// The first `n` entries of the leading axis.
inline attn::array leading(const attn::array& a, std::size_t first, std::size_t n) {
    attn::array r = a;
    const std::size_t per = a.data.size() / a.shape[0];
    r.shape[0] = n;
    r.data = std::vector<std::byte>(a.data.begin() + static_cast<std::ptrdiff_t>(first * per),
                                    a.data.begin() + static_cast<std::ptrdiff_t>((first + n) * per));
    return r;
}

/// Entry `i` of the leading axis, without it.
inline attn::array at(const attn::array& a, std::size_t i) {
    attn::array r = leading(a, i, 1);
    r.shape.erase(r.shape.begin());
    return r;
}

inline std::vector<attn::named_array> run(const std::string& args, const std::string& out) {
    const auto r = run_attn("compute " + args + " --format npz -o '" + out + "'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    return read_npz_file(out);
}

inline void check(const attn::array& got, const attn::array& want, double tol, const char* what) {
    const std::string stage = what;  // doctest prints a const char* capture as its address
    CAPTURE(stage);
    const auto cmp = compare_arrays(got, want, tol, tol);
    CHECK_MESSAGE(cmp.ok, cmp.summary);
}

/// Runs every check of the file comment on case `c`.
inline void check_checkpoint_case(const checkpoint_case& c) {
    CAPTURE(c.name);
    scratch_dir dir;
    const std::string out = dir.path + "/out.npz";
    const auto want = read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + c.expected);
    const attn::array& hidden = member(want, "hidden_states");
    const std::size_t L = hidden.shape[0] - 1;
    const std::string ids = " --token-ids " + c.expected + ":ids";
    for (const auto& [dtype, tol] : {std::pair<std::string, double>{"float64", 1e-9}, {"float32", 2e-4}}) {
        CAPTURE(dtype);
        // q and k after RoPE where the reference keeps them (the RoPE scaling cases).
        const bool qk = find_array(want, "q") != nullptr;
        const auto got = run(c.checkpoint + ids + c.options + " --layer all --dump x,x_norm," + (qk ? "q,k," : "") +
                                 "weights,output --dtype " + dtype, out);
        if (qk) {
            check(member(got, "q"), member(want, "q"), tol, "q");
            check(member(got, "k"), member(want, "k"), tol, "k");
        }
        check(member(got, "x"), leading(hidden, 0, L), tol, "x");
        check(member(got, "x_norm"), member(want, "x_norm"), tol, "x_norm");
        check(member(got, "weights"), member(want, "weights"), tol, "weights");
        check(member(got, "output"), member(want, "output"), tol, "output");
    }
    // Layer 1 from its residual stream, and from the ids (block 0 run first).
    for (const std::string input : {" --x " + c.expected + ":x_layer1", ids}) {
        const auto got = run(c.checkpoint + input + c.options + " --layer 1 --dump weights,output --dtype float64", out);
        check(member(got, "weights"), at(member(want, "weights"), 1), 1e-9, "weights of layer 1");
        check(member(got, "output"), at(member(want, "output"), 1), 1e-9, "output of layer 1");
    }
    // Attention rollout over every layer (Abnar & Zuidema 2020).
    check(member(run(c.checkpoint + ids + c.options + " --layer all --dump rollout --dtype float64", out), "rollout"),
          member(want, "rollout"), 1e-9, "rollout");
    // The streaming path (output only) and the reference kernel.
    for (const std::string kernel : {"fast", "reference"}) {
        CAPTURE(kernel);
        const auto got = run(c.checkpoint + ids + c.options + " --layer all --dump output --dtype float64 --kernel " + kernel, out);
        check(member(got, "output"), member(want, "output"), 1e-9, "output");
    }
}

/// Runs case `c` on its expected.npz's ids with every layer, in float64 (to 1e-9) and
/// float32 (to 2e-4), dumping `dump` (a --dump list), and checks each stage of `stages`
/// against expected.npz; `more`, when given, adds a family's own checks on each run.
inline void check_every_layer(const checkpoint_case& c, const std::string& dump,
                              const std::vector<std::string>& stages = {"q_proj", "k_proj", "q", "k"},
                              const std::function<void(const std::vector<attn::named_array>&)>& more = {}) {
    scratch_dir dir;
    const auto want = read_npz_file(std::string(ATTN_SOURCE_DIR) + "/" + c.expected);
    for (const auto& [dtype, tol] : {std::pair<std::string, double>{"float64", 1e-9}, {"float32", 2e-4}}) {
        CAPTURE(dtype);
        const auto got = run(c.checkpoint + " --token-ids " + c.expected + ":ids --layer all --dump " + dump + " --dtype " + dtype,
                             dir.path + "/out.npz");
        for (const std::string& s : stages) attn_test::check(member(got, s), member(want, s), tol, s.c_str());
        if (more) more(got);
    }
}

}  // namespace attn_test
