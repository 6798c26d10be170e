// A checkpoint run's text outputs streamed layer by layer (docs/design.md §5.4): JSON Lines
// of listed or all layers hold one line per layer, byte for byte what --layer N writes for
// that layer, on stdout and through -o; a run that fails part way leaves the destination as
// it was; rollout, made from every layer at the end, is refused. CSV and JSON (one document)
// streamed to -o are byte for byte the held output.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "attn/io/npy.hpp"
#include "cli_util.hpp"
#include "npz_members.hpp"
#include "refusals.hpp"
#include "scratch_dir.hpp"

namespace {

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line + "\n");
    return lines;
}

std::size_t files_in(const std::string& dir) {
    return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator{}));
}

/// A run of several layers (`args` holds "--layer LIST"), written as JSON Lines on stdout
/// and to a file: both give the same bytes, one line per layer in `layers`, each the
/// output of `single` with --layer N for that layer.
void check_lines(const std::string& args, const std::string& single, const std::vector<std::size_t>& layers) {
    CAPTURE(args);
    attn_test::scratch_dir dir;
    const auto on_stdout = attn_test::run_attn("compute " + args + " --format jsonl");
    REQUIRE_MESSAGE(on_stdout.code == 0, on_stdout.err);
    CHECK(on_stdout.err.empty());
    const std::string file = dir.path + "/out.jsonl";
    const auto to_file = attn_test::run_attn("compute " + args + " -o '" + file + "'");
    REQUIRE_MESSAGE(to_file.code == 0, to_file.err);
    CHECK(to_file.out.empty());
    CHECK(attn_test::slurp(file) == on_stdout.out);
    const std::vector<std::string> lines = lines_of(on_stdout.out);
    REQUIRE(lines.size() == layers.size());
    for (std::size_t i = 0; i < layers.size(); ++i) {
        CAPTURE(layers[i]);
        const auto one = attn_test::run_attn("compute " + single + " --layer " + std::to_string(layers[i]) + " --format jsonl");
        REQUIRE_MESSAGE(one.code == 0, one.err);
        CHECK(lines[i] == one.out);
    }
    CHECK(files_in(dir.path) == 1);  // no temporary left beside it
}

}  // namespace

TEST_CASE("JSON Lines of several layers: line i is the --layer N run's output, byte for byte, on stdout and in -o") {
    const std::string gpt2 = "data/gpt2-tiny --ids 11,12,13,14,15";
    const std::string llama = "data/llama-tiny --ids 1,7,300,42,5,9";
    const std::string gemma3 = "tests/fixtures/checkpoints/gemma3-tiny --ids 1,5,9,2,7,3,8,4";  // sliding and full layers
    const std::string qwen3 = "tests/fixtures/checkpoints/qwen3-tiny --ids 1,5,9,2";
    const std::string every = " --dump x,x_norm,q_proj,k_proj,q,k,v,qk,scaled,scores,weights,output,lse,stats,head_stats,mask";
    const std::string rope_free = " --dump x,x_norm,q,k,v,qk,scaled,scores,weights,output,lse,stats,head_stats,mask";  // gpt2: no q_proj
    check_lines(gpt2 + " --layer all" + rope_free, gpt2 + rope_free, {0, 1});
    check_lines(gpt2 + " --layer all --dump weights --dtype float64", gpt2 + " --dump weights --dtype float64", {0, 1});
    check_lines(llama + " --layer all" + every, llama + every, {0, 1});
    check_lines(llama + " --layer 0,1 --dump weights,output --precision 5", llama + " --dump weights,output --precision 5", {0, 1});
    check_lines(gemma3 + " --layer all" + every, gemma3 + every, {0, 1, 2, 3});
    check_lines(gemma3 + " --layer 1,3 --dump weights --average-heads", gemma3 + " --dump weights --average-heads", {1, 3});
    check_lines(qwen3 + " --layer 0-1 --dump q_proj,k_proj,weights", qwen3 + " --dump q_proj,k_proj,weights", {0, 1});
    // Texts (the tokenizer's labels and meta.model.text), and a padded batch of two.
    check_lines("data/llama-tiny --layer all --text 'the river bank' --text 'a bank' --dump weights",
                "data/llama-tiny --text 'the river bank' --text 'a bank' --dump weights", {0, 1});
    // Ids in a batch whose items differ (meta.model.tokens).
    check_lines("data/llama-tiny --layer all --token-ids tests/fixtures/checkpoints/bert-tiny/expected-padded.npz:attention_mask --dump weights",
                "data/llama-tiny --token-ids tests/fixtures/checkpoints/bert-tiny/expected-padded.npz:attention_mask --dump weights", {0, 1});
}

TEST_CASE("JSON Lines of several layers: line N + 1 of the all-layers file (sed -n N+1p) is the --layer N run") {
    // The shell's view of the same promise, on both model directories of data/.
    attn_test::scratch_dir dir;
    for (const std::string model : {"data/gpt2-tiny", "data/llama-tiny"}) {
        CAPTURE(model);
        const std::string all = dir.path + "/all.jsonl";
        auto r = attn_test::run_attn("compute " + model + " --layer all --ids 3,1,4,1,5 --dump weights,output -o '" + all + "'");
        REQUIRE_MESSAGE(r.code == 0, r.err);
        for (int layer : {0, 1}) {
            r = attn_test::run_attn("compute " + model + " --layer " + std::to_string(layer) + " --ids 3,1,4,1,5 --dump weights,output --format jsonl");
            REQUIRE_MESSAGE(r.code == 0, r.err);
            const std::vector<std::string> lines = lines_of(attn_test::slurp(all));  // sed -n Np, N = layer + 1
            REQUIRE(lines.size() == 2);
            CHECK(lines[static_cast<std::size_t>(layer)] == r.out);
        }
    }
}

TEST_CASE("JSON Lines of several layers with --plot: the plot of the first layer, as a held run draws it") {
    attn_test::scratch_dir dir;
    const std::string args = "compute tests/fixtures/checkpoints/gemma3-tiny --layer 1,3 --ids 1,5,9,2,7,3,8,4 --dump output";
    auto r = attn_test::run_attn(args + " --format json -o '" + dir.path + "/held.json' --plot '" + dir.path + "/held.svg'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    r = attn_test::run_attn(args + " --format jsonl -o '" + dir.path + "/lines.jsonl' --plot '" + dir.path + "/lines.svg'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(attn_test::slurp(dir.path + "/lines.svg") == attn_test::slurp(dir.path + "/held.svg"));
    // The stage added for the plot is not written.
    const std::vector<std::string> lines = lines_of(attn_test::slurp(dir.path + "/lines.jsonl"));
    REQUIRE(lines.size() == 2);
    CHECK(lines[0].find("\"weights\"") == std::string::npos);
    CHECK(lines[0].find("\"output\":") != std::string::npos);
}

TEST_CASE("JSON Lines of several layers: a run that fails part way leaves the destination as it was") {
    attn_test::scratch_dir dir;
    const std::string out = dir.path + "/out.jsonl";
    attn_test::spit(out, "before");
    // x of 4 layers, 8 × 32 numbers a line, about 3.3 KB each: `ulimit -f 4` (KiB for bash)
    // lets the first line through and fails the second with EFBIG once SIGXFSZ is ignored.
    auto r = attn_test::run_attn("compute tests/fixtures/checkpoints/gemma3-tiny --layer all --ids 1,5,9,2,7,3,8,4 --dump x -o '" + out + "'", "",
                                 "trap '' XFSZ && ulimit -f 4 && ");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + out + ": cannot write output (File too large)\n");
    CHECK(attn_test::slurp(out) == "before");
    CHECK(files_in(dir.path) == 1);
    // The same run under no limit replaces it with its four lines.
    r = attn_test::run_attn("compute tests/fixtures/checkpoints/gemma3-tiny --layer all --ids 1,5,9,2,7,3,8,4 --dump x -o '" + out + "'");
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(lines_of(attn_test::slurp(out)).size() == 4);
    CHECK(attn_test::slurp(out).size() > 4096);  // the limit above did bite
}

TEST_CASE("JSON Lines of several layers refuse rollout, made from every layer at the end, and carry --words in each line") {
    attn_test::scratch_dir dir;
    attn_test::refused("data/llama-tiny --layer all --ids 1,2,3 --dump weights,rollout --format jsonl", 2,
                       "--dump: rollout multiplies every layer's weights, and JSON Lines hold one layer a line "
                       "(expected --format json, csv or npz, got jsonl)");
    attn_test::refused("data/llama-tiny --layer all --ids 1,2,3 --dump rollout -o '" + dir.path + "/r.jsonl'", 2,
                       "--dump: rollout multiplies every layer's weights, and JSON Lines hold one layer a line "
                       "(expected --format json, csv or npz, got jsonl)");
    CHECK(files_in(dir.path) == 0);
    // word_weights is made layer by layer: each line is --layer N --words's output (the
    // words as labels, meta.model.text.words), with the same words and with words that differ.
    check_lines("data/llama-tiny --layer all --text 'The capital of France is' --words",
                "data/llama-tiny --text 'The capital of France is' --words", {0, 1});
    check_lines("data/llama-tiny --layer 0,1 --text 'the river bank' --text 'a bank' --dump word_weights,weights",
                "data/llama-tiny --text 'the river bank' --text 'a bank' --dump word_weights,weights", {0, 1});
}

TEST_CASE("CSV and JSON of several layers streamed to -o and to stdout: byte for byte the held output of -o DIR/") {
    const std::vector<std::string> runs{
        "data/gpt2-tiny --layer all --ids 11,12,13,14,15 --dump x,x_norm,q,k,v,qk,scaled,scores,weights,output,lse,stats,head_stats,mask",
        "data/gpt2-tiny --layer all --ids 11,12,13 --dump weights --dtype float64 --precision 6",
        "data/llama-tiny --layer all --ids 1,7,300,42,5,9 --dump x,x_norm,q_proj,k_proj,q,k,v,scores,weights,output,head_stats",
        "data/llama-tiny --layer all --text 'the river bank' --text 'a bank' --dump weights,x",
        "data/llama-tiny --layer all --token-ids tests/fixtures/checkpoints/bert-tiny/expected-padded.npz:attention_mask --dump weights,lse",
        "tests/fixtures/checkpoints/gemma3-tiny --layer all --ids 1,5,9,2,7,3,8,4 --dump weights,output,stats",
        "tests/fixtures/checkpoints/gemma3-tiny --layer 1,3 --ids 1,5,9,2,7,3,8,4 --dump weights,scores,head_stats --average-heads",
        "data/llama-tiny --layer all --text 'The capital of France is' --words",  // word_weights made layer by layer
        "data/llama-tiny --layer 0,1 --text 'the river bank' --text 'a bank' --dump word_weights,x",
        "tests/fixtures/checkpoints/qwen3-tiny --layer 1-2 --ids 1,5,9,2 --dump q_proj,k_proj,weights",
    };
    // The held writer: a folder output (-o DIR/) writes each input's document whole.
    attn_test::scratch_dir dir, held_dir, tmp;
    for (const std::string& args : runs)
        for (const std::string format : {"csv", "json", "json --compact"}) {
            CAPTURE(args);
            CAPTURE(format);
            const std::string ext = format.substr(0, format.find(' '));
            for (const auto& e : std::filesystem::directory_iterator(held_dir.path)) std::filesystem::remove(e.path());
            const auto held_run = attn_test::run_attn("compute " + args + " --format " + format + " -o '" + held_dir.path + "/'");
            REQUIRE_MESSAGE(held_run.code == 0, held_run.err);
            REQUIRE(files_in(held_dir.path) == 1);
            const std::string held = attn_test::slurp(std::filesystem::directory_iterator(held_dir.path)->path().string());
            const std::string file = dir.path + "/out." + ext;
            for (const auto& e : std::filesystem::directory_iterator(dir.path)) std::filesystem::remove(e.path());
            const auto streamed = attn_test::run_attn("compute " + args + " --format " + format + " -o '" + file + "'");
            REQUIRE_MESSAGE(streamed.code == 0, streamed.err);
            CHECK(streamed.out.empty());
            CHECK(attn_test::slurp(file) == held);
            CHECK(files_in(dir.path) == 1);  // the spools had no names
            // On stdout the spools go to $TMPDIR, nameless too.
            const auto on_stdout = attn_test::run_attn("compute " + args + " --format " + format, "", "TMPDIR='" + tmp.path + "' ");
            REQUIRE_MESSAGE(on_stdout.code == 0, on_stdout.err);
            CHECK(on_stdout.out == held);
            CHECK(files_in(tmp.path) == 0);
        }
    const std::string compact = attn_test::slurp(dir.path + "/out.json");
    CHECK(compact.find('\n') == compact.size() - 1);  // one line
    REQUIRE(attn_test::run_attn("compute " + runs.back() + " -o '" + dir.path + "/out.csv'").code == 0);
    // A list's `layer` column holds the model's layers.
    const std::string text = attn_test::slurp(dir.path + "/out.csv");
    CHECK(text.rfind("tensor,layer,batch,head,row,col,value\nq_proj,1,0,0,0,0,", 0) == 0);
    CHECK(text.find("\nweights,2,") != std::string::npos);
    CHECK(text.find("\nweights,0,") == std::string::npos);
}

TEST_CASE("CSV and JSON of several layers: a run that fails part way leaves the destination as it was, and no spool") {
    attn_test::scratch_dir dir;
    const std::string out = dir.path + "/out.csv";
    attn_test::spit(out, "before");
    // x_norm and x of 4 layers, 8 × 32 lines each: x_norm's spool takes 7.3 KB a layer,
    // 29.4 KB in all, x's 23.7 KB, the joined file 53 KB. `ulimit -f 32` (KiB for bash) lets
    // both spools through and fails the joined file; `ulimit -f 8` fails x_norm's spool at
    // its second layer.
    const std::string run = "compute tests/fixtures/checkpoints/gemma3-tiny --layer all --ids 1,5,9,2,7,3,8,4 --dump x_norm,x -o '" + out + "'";
    for (const std::string limit : {"32", "8"}) {
        CAPTURE(limit);
        const auto r = attn_test::run_attn(run, "", "trap '' XFSZ && ulimit -f " + limit + " && ");
        CHECK(r.code == 1);
        CHECK(r.err == "attn: error: " + out + ": cannot write output (File too large)\n");
        CHECK(attn_test::slurp(out) == "before");
        CHECK(files_in(dir.path) == 1);
    }
    auto r = attn_test::run_attn(run);
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(attn_test::slurp(out).size() > 32 * 1024);  // the limits above did bite
    // JSON: x takes about 2.9 KB a layer pretty, 11.9 KB a spool, 13 KB joined: `ulimit -f
    // 12` fails the joined file, `ulimit -f 6` the spool.
    const std::string json = dir.path + "/out.json";
    attn_test::spit(json, "before");
    const std::string json_run = "compute tests/fixtures/checkpoints/gemma3-tiny --layer all --ids 1,5,9,2,7,3,8,4 --dump x -o '" + json + "'";
    for (const std::string limit : {"12", "6"}) {  // joining fails; a spool fails
        CAPTURE(limit);
        r = attn_test::run_attn(json_run, "", "trap '' XFSZ && ulimit -f " + limit + " && ");
        CHECK(r.code == 1);
        CHECK(r.err == "attn: error: " + json + ": cannot write output (File too large)\n");
        CHECK(attn_test::slurp(json) == "before");
        CHECK(files_in(dir.path) == 2);
    }
    r = attn_test::run_attn(json_run);
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(attn_test::slurp(json).size() > 12 * 1024);
}

TEST_CASE("JSON Lines of several layers hold one layer: peak memory of --layer all --dump weights at T = 1024") {
    attn_test::scratch_dir dir;
    // gemma3-tiny: 4 layers of 4 heads × 1024² float32 weights, 16 MiB each. Held, the layers
    // and their stack took 128 MiB (155 MB peak for the same run's held CSV); a line at a
    // time, 38 MB.
    attn_test::write_cycled_ids(dir.path + "/ids.npy", 1024);
    const auto m = attn_test::run_attn_measured("compute tests/fixtures/checkpoints/gemma3-tiny --layer all --token-ids '" + dir.path +
                                                "/ids.npy' --dump weights --precision 2 -o '" + dir.path + "/out.jsonl'");
    REQUIRE_MESSAGE(m.code == 0, "the run failed");
    CHECK(m.peak_kb < attn_test::peak_bound_mb(80) * 1024);  // KiB; four layers held pass 128 MiB of weights alone
    CHECK(std::filesystem::file_size(dir.path + "/out.jsonl") > 4 * 1024 * 1024 * 4);
}

TEST_CASE("JSON of several layers on stdout holds one layer: peak memory of --layer all --dump weights at T = 1024") {
    // As the JSON Lines case above: four layers of 16 MiB of weights, held and stacked they
    // pass 128 MiB; on stdout each tensor's layers are spooled in $TMPDIR and joined.
    attn_test::scratch_dir dir, tmp;
    attn_test::write_cycled_ids(dir.path + "/ids.npy", 1024);
    const auto m = attn_test::run_attn_measured("compute tests/fixtures/checkpoints/gemma3-tiny --layer all --token-ids '" + dir.path +
                                                "/ids.npy' --dump weights --precision 1 --compact --format json",
                                                "TMPDIR='" + tmp.path + "' ");
    REQUIRE_MESSAGE(m.code == 0, "the run failed");
    CHECK(m.peak_kb < attn_test::peak_bound_mb(80) * 1024);  // KiB
    CHECK(files_in(tmp.path) == 0);
}

TEST_CASE("JSON of several layers killed mid-way: the destination as it was, and no spool left, even after SIGKILL") {
    // T = 1024 on gemma3-tiny: four layers of 16 MiB of weights, about a second of text;
    // the signal arrives once the temporary exists (the first layer is being spooled).
    attn_test::scratch_dir dir;
    attn_test::write_cycled_ids(dir.path + "/ids.npy", 1024);
    const std::string out_dir = dir.path + "/out";
    std::filesystem::create_directory(out_dir);
    const std::string out = out_dir + "/out.json";
    for (const std::string sig : {"TERM", "KILL"}) {
        CAPTURE(sig);
        attn_test::spit(out, "before");
        // The shell waits for the temporary (open in the run, unnamed: /proc shows
        // "out/#INODE (deleted)"; or named out.json.attn-XXXXXX where the filesystem has no
        // O_TMPFILE), lets the run go on a little, then signals it.
        const std::string script = "cd '" + std::string(ATTN_SOURCE_DIR) + "' && { '" + ATTN_BINARY +
                                   "' compute tests/fixtures/checkpoints/gemma3-tiny --layer all --token-ids '" + dir.path +
                                   "/ids.npy' --dump weights --precision 2 -o '" + out + "' 2>/dev/null & p=$!; " +
                                   "while kill -0 $p && ! ls -l /proc/$p/fd | grep -q -e '" + out_dir + "/#' -e attn-; do sleep 0.01; done; " +
                                   "sleep 0.2; kill -" + sig +
                                   " $p; wait $p; echo $? > '" + dir.path + "/code'; } 2>/dev/null";
        REQUIRE(std::system(script.c_str()) == 0);
        const std::string code = attn_test::slurp(dir.path + "/code");
        CHECK(code == (sig == "TERM" ? "143\n" : "137\n"));  // killed, not finished
        CHECK(attn_test::slurp(out) == "before");
        // SIGTERM removes the pending temporary; SIGKILL cannot, but neither it nor the
        // spools had a name.
        std::vector<std::string> names;
        for (const auto& e : std::filesystem::directory_iterator(out_dir)) names.push_back(e.path().filename().string());
        CHECK(names == std::vector<std::string>{"out.json"});
        for (const auto& n : names)
            if (n != "out.json") std::filesystem::remove(out_dir + "/" + n);
    }
}
