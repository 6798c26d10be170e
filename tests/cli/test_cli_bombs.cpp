// Hostile inputs that used to exhaust memory or the stack despite --max-bytes,
// run through the real binary; each test measures the child's peak RSS with
// getrusage(RUSAGE_CHILDREN) and checks exit code, message and that nothing is written.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "cli_util.hpp"
#include "io_fixtures.hpp"
#include "scratch_dir.hpp"

using attn_test::run_attn;
using attn_test::scratch_dir;

namespace {

/// Peak resident set of the largest child this process has waited for, in MB. Linux keeps
/// a child's peak across exec, and a forked child starts with its parent's resident pages:
/// the tests free their large buffers before they run attn.
double children_peak_mb() {
    struct rusage ru {};
    REQUIRE(getrusage(RUSAGE_CHILDREN, &ru) == 0);
    return static_cast<double>(ru.ru_maxrss) / 1024.0;  // KiB on Linux
}

/// A member's content made on the fly, so that the test never holds it: `head` followed
/// by `zeros` zero bytes (libzip's zip_source_function protocol).
struct zero_member {
    std::string head;
    std::size_t zeros;
    std::size_t offset = 0;
};

zip_int64_t zero_member_source(void* state, void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
    auto* m = static_cast<zero_member*>(state);
    const std::size_t total = m->head.size() + m->zeros;
    switch (cmd) {
        case ZIP_SOURCE_OPEN: m->offset = 0; return 0;
        case ZIP_SOURCE_READ: {
            const std::size_t n = std::min<std::size_t>(len, total - m->offset);
            auto* out = static_cast<char*>(data);
            for (std::size_t i = 0; i < n; ++i, ++m->offset)
                out[i] = m->offset < m->head.size() ? m->head[m->offset] : '\0';
            return static_cast<zip_int64_t>(n);
        }
        case ZIP_SOURCE_CLOSE: return 0;
        case ZIP_SOURCE_STAT: {
            auto* st = static_cast<zip_stat_t*>(data);
            zip_stat_init(st);
            st->size = total;
            st->valid |= ZIP_STAT_SIZE;
            return sizeof(zip_stat_t);
        }
        case ZIP_SOURCE_ERROR: return 0;
        case ZIP_SOURCE_FREE: delete m; return 0;
        case ZIP_SOURCE_SUPPORTS:
            return zip_source_make_command_bitmap(ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE, ZIP_SOURCE_STAT,
                                                  ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE, -1);
        default: return -1;
    }
}

/// Writes an .npz whose members (name, .npy header, count of zero bytes after it) are
/// deflated at level 1.
void write_deflated_npz(const std::string& path, const std::vector<std::tuple<std::string, std::string, std::size_t>>& members) {
    int err = 0;
    zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
    REQUIRE(z != nullptr);
    for (const auto& [name, head, zeros] : members) {
        zip_source_t* src = zip_source_function(z, zero_member_source, new zero_member{head, zeros});
        REQUIRE(src != nullptr);
        const zip_int64_t idx = zip_file_add(z, (name + ".npy").c_str(), src, ZIP_FL_ENC_UTF_8);
        REQUIRE(idx >= 0);
        REQUIRE(zip_set_file_compression(z, static_cast<zip_uint64_t>(idx), ZIP_CM_DEFLATE, 1) == 0);
    }
    REQUIRE(zip_close(z) == 0);
}

/// A member holding float64 zeros of the given shape text and element count.
std::tuple<std::string, std::string, std::size_t> zeros_member(const std::string& name, const std::string& shape,
                                                               std::size_t count) {
    return {name, io_test::npy_v1("<f8", shape, ""), count * 8};
}

}  // namespace

TEST_CASE("bombs: an .npz member declaring (4, 8) that inflates to 256 MiB is refused before it is inflated") {
    scratch_dir dir;
    const std::string bomb = dir.path + "/bomb.npz";
    const std::string header = io_test::npy_v1("<f8", "(4, 8)", "");
    const std::size_t member_size = header.size() + (std::size_t{256} << 20);
    write_deflated_npz(bomb, {{"q", header, std::size_t{256} << 20}});
    const auto r = run_attn("compute --max-bytes 64M '" + bomb + "' -o '" + dir.path + "/out.json'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + bomb + ":q: member larger than its array (expected " +
                       std::to_string(header.size() + 256) + " bytes, got " + std::to_string(member_size) + ")\n");
    CHECK(children_peak_mb() < attn_test::peak_bound_mb(112));  // ~15 MB in a release build, ~75 MB under ASan
    CHECK_FALSE(std::filesystem::exists(dir.path + "/out.json"));
}

TEST_CASE("bombs: arrays attn does not use are not read, and those it reads are bounded together") {
    scratch_dir dir;
    const std::string many = dir.path + "/many.npz";
    std::vector<std::tuple<std::string, std::string, std::size_t>> members;
    for (const char* name : {"q", "k", "v"}) members.push_back(zeros_member(name, "(4, 8)", 32));
    for (int i = 0; i < 24; ++i) members.push_back(zeros_member("unused_" + std::to_string(i), "(2097152,)", 2097152));
    write_deflated_npz(many, members);  // 24 x 16 MiB
    auto r = run_attn("compute --max-bytes 64M --dump weights --compact '" + many + "'");
    CHECK(r.code == 0);
    CHECK(r.out.find("\"weights\":[[0.25,0.25,0.25,0.25]") != std::string::npos);
    CHECK(children_peak_mb() < attn_test::peak_bound_mb(160));  // 24 × 16 MiB = 384 MiB were inflated before

    // q, k and v of 24 MiB each pass one by one under 64M, not together.
    const std::string three = dir.path + "/three.npz";
    write_deflated_npz(three, {zeros_member("q", "(3145728,)", 3145728), zeros_member("k", "(3145728,)", 3145728),
                               zeros_member("v", "(3145728,)", 3145728)});
    r = run_attn("compute --max-bytes 64M '" + three + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + three + ": arrays too large for --max-bytes together (expected at most 67108864 "
                                             "bytes from one file, got 75497472)\n");
}

TEST_CASE("bombs: a JSON text whose parse would take more than 8 x --max-bytes is refused before parsing") {
    scratch_dir dir;
    const std::string path = dir.path + "/big.json";
    {
        std::string text = "[";
        const std::size_t n = 4'000'000;  // 8 MB of "0," parse to ~190 MB of DOM
        text.reserve(2 * n + 2);
        for (std::size_t i = 0; i < n; ++i) text += i ? ",0" : "0";
        text += "]";
        attn_test::spit(path, text);
    }
    const auto r = run_attn("compute --max-bytes 16M '" + path + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + path + ": JSON too large to parse within --max-bytes (expected at most 134217728 "
                                            "bytes, got about 192000048)\n");
    CHECK(children_peak_mb() < attn_test::peak_bound_mb(112));  // ~15 MB in a release build, ~75 MB under ASan
    const auto inspect = run_attn("inspect --max-bytes 16M '" + path + "'");
    CHECK(inspect.code == 1);
    CHECK(children_peak_mb() < attn_test::peak_bound_mb(112));  // ~15 MB in a release build, ~75 MB under ASan
}

TEST_CASE("bombs: JSON objects nested 30 000 deep (180 KB) are refused by inspect, compare and compute") {
    scratch_dir dir;
    const std::string path = dir.path + "/nested.json";
    std::string text;
    for (int i = 0; i < 30000; ++i) text += "{\"a\":";
    text += "[[1, 2]]";
    text += std::string(30000, '}');
    attn_test::spit(path, text);
    // {"a": is 5 bytes: the 257th '{' (one level beyond max_json_depth) is at byte 1280.
    const std::string message = "attn: error: " + path + ": JSON nested too deep (expected at most 256 levels, got more at byte 1280)\n";
    for (const std::string& args : {"inspect --format json '" + path + "'", "compare '" + path + "' '" + path + "'",
                                    "compute '" + path + "' -o '" + dir.path + "/out.json'"}) {
        CAPTURE(args);
        const auto r = run_attn(args);
        CHECK(r.code == 1);
        CHECK(r.err == message);
    }
    CHECK(children_peak_mb() < attn_test::peak_bound_mb(112));  // 1.26 GB before (the dotted names of every level, quadratic)
    CHECK_FALSE(std::filesystem::exists(dir.path + "/out.json"));
}

namespace {

const std::string gpt2 = "data/gpt2-tiny/model.safetensors";

/// attn compute on gpt2-tiny's layer 0 with ids 0,1,2 labelled through `vocab` (the
/// tokenizer --vocab names), to out.json.
attn_test::run_result label_with(const scratch_dir& dir, const std::string& vocab, const std::string& extra = "") {
    return run_attn("compute " + gpt2 + " --layer 0 --ids 0,1,2 --vocab '" + vocab + "' --dump weights --compact -o '" +
                    dir.path + "/out.json'" + extra);
}

}  // namespace

TEST_CASE("bombs: a tokenizer.json id beyond tokenizers' u32 is refused, not truncated, and a huge id allocates nothing") {
    scratch_dir dir;
    const std::string vocab = dir.path + "/tokenizer.json";
    // 2^32 read as a u32 was id 0: another token's.
    attn_test::spit(vocab, R"({"model":{"type":"WordLevel","vocab":{"a":4294967296},"unk_token":"a"}})");
    auto r = label_with(dir, vocab);
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + vocab + ": model WordLevel: vocab entry 'a': id out of range (expected at most 4294967295, got 4294967296)\n");
    attn_test::spit(vocab, R"({"model":{"type":"WordLevel","vocab":{"a":0},"unk_token":"a"},"added_tokens":[{"id":18446744073709551615,"content":"<s>"}]})");
    r = label_with(dir, vocab);
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + vocab + ": added token: id out of range (expected at most 4294967295, got 18446744073709551615)\n");
    CHECK_FALSE(std::filesystem::exists(dir.path + "/out.json"));
    // The largest id (the label reader before took a table of as many strings as the id named).
    attn_test::spit(vocab, R"({"model":{"type":"WordLevel","vocab":{"a":4294967295,"b":0,"c":1},"unk_token":"a"},"added_tokens":[{"id":2,"content":"<s>"}]})");
    r = label_with(dir, vocab);
    REQUIRE_MESSAGE(r.code == 0, r.err);
    CHECK(children_peak_mb() < attn_test::peak_bound_mb(112));
    CHECK(attn_test::slurp(dir.path + "/out.json").find(R"("tokens":["b","c","<s>"])") != std::string::npos);
}

TEST_CASE("bombs: a tokenizer.json decoder nested 100 000 deep (200 KB) is refused, not a stack overflow") {
    scratch_dir dir;
    const std::string vocab = dir.path + "/tokenizer.json";
    std::string text = R"({"model":{"type":"WordLevel","vocab":{"a":0}},"decoder":)";
    const std::size_t at = text.size();
    text += std::string(100000, '[') + std::string(100000, ']') + "}";
    attn_test::spit(vocab, text);
    const auto r = label_with(dir, vocab);
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + vocab + ": JSON nested too deep (expected at most 256 levels, got more at byte " +
                       std::to_string(at + 255) + ")\n");  // the top object is level 1
    CHECK(children_peak_mb() < attn_test::peak_bound_mb(112));
    CHECK_FALSE(std::filesystem::exists(dir.path + "/out.json"));
}

TEST_CASE("bombs: a byte-fallback token that is not hexadecimal is an ordinary token, not a 'stoi' error") {
    scratch_dir dir;
    const std::string vocab = dir.path + "/tokenizer.json";
    attn_test::spit(vocab, "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"<0xZZ>\":0,\"<0x41>\":1,\"\xE2\x96\x81" "b\":2},\"merges\":[],"
                           "\"byte_fallback\":true},\"decoder\":{\"type\":\"ByteFallback\"}}");
    const auto r = label_with(dir, vocab);
    REQUIRE_MESSAGE(r.code == 0, r.err);
    // 0x41 is 'A' (ASCII); the ByteFallback decoder leaves other tokens as they are.
    CHECK(attn_test::slurp(dir.path + "/out.json").find("\"tokens\":[\"<0xZZ>\",\"A\",\"\xE2\x96\x81" "b\"]") != std::string::npos);
}

TEST_CASE("bombs: side JSON files have limits of their own, whatever --max-bytes allows") {
    scratch_dir dir;
    const std::string big = dir.path + "/config.json";
    // Sparse files: over the limits without taking disk space or time to write.
    auto sparse = [](const std::string& path, std::uintmax_t size) {
        attn_test::spit(path, "{");
        std::filesystem::resize_file(path, size);
    };
    sparse(big, (std::uintmax_t{16} << 20) + 1);
    auto r = run_attn("compute " + gpt2 + " --layer 0 --ids 0,1 --config '" + big + "' -o '" + dir.path + "/out.json'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + big + ": config.json too large (expected at most 16777216 bytes, got 16777217)\n");

    const std::string tok = dir.path + "/tokenizer.json";
    sparse(tok, (std::uintmax_t{256} << 20) + 1);
    r = label_with(dir, tok, " --max-bytes 100G");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + tok + ": tokenizer.json too large (expected at most 268435456 bytes, got 268435457)\n");

    const std::string index = dir.path + "/model.safetensors.index.json";
    sparse(index, (std::uintmax_t{16} << 20) + 1);
    r = run_attn("inspect --max-bytes 100G '" + index + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + index + ": safetensors index too large (expected at most 16777216 bytes, got 16777217)\n");
    CHECK(children_peak_mb() < attn_test::peak_bound_mb(112));
    CHECK_FALSE(std::filesystem::exists(dir.path + "/out.json"));
}

TEST_CASE("bombs: a config.json of 15 MB of numbers is refused before it is parsed (4 x its limit)") {
    scratch_dir dir;
    const std::string config = dir.path + "/config.json";
    {
        std::string text = "{\"a\":[0";
        const std::size_t n = 7'500'000;  // 15 MB of ",0": about 360 MB as a DOM
        text.reserve(2 * n + 8);
        for (std::size_t i = 1; i < n; ++i) text += ",0";
        text += "]}";
        attn_test::spit(config, text);
    }
    const auto r = run_attn("compute " + gpt2 + " --layer 0 --ids 0,1 --config '" + config + "' -o '" + dir.path + "/out.json'");
    CHECK(r.code == 1);
    // The estimate of check_json_parse_bytes: 48 bytes a value (one, plus one per ',', '{'
    // and '['; 7 499 999 commas here) and the bytes of strings after their opening quote.
    CHECK(r.err == "attn: error: " + config + ": config.json too large to parse (expected at most 67108864 bytes, got about " +
                       std::to_string((1 + 7'499'999 + 2) * 48 + 2) + ")\n");
    CHECK(children_peak_mb() < attn_test::peak_bound_mb(112));
    CHECK_FALSE(std::filesystem::exists(dir.path + "/out.json"));
}

TEST_CASE("bombs: a number out of range in a config.json or a tokenizer.json is one line naming the file") {
    scratch_dir dir;
    const std::string config = dir.path + "/config.json";
    attn_test::spit(config, R"({"model_type": "gpt2", "n_embd": 1e999})");
    auto r = run_attn("compute " + gpt2 + " --layer 0 --ids 0,1 --config '" + config + "' -o '" + dir.path + "/out.json'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + config + ": invalid JSON (number overflow parsing '1e999')\n");
    const std::string vocab = dir.path + "/tokenizer.json";
    attn_test::spit(vocab, R"({"model":{"type":"WordLevel","vocab":{"a":0}},"x":1e999})");
    r = label_with(dir, vocab);
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + vocab + ": invalid JSON (number overflow parsing '1e999')\n");
    CHECK_FALSE(std::filesystem::exists(dir.path + "/out.json"));
}

TEST_CASE("bombs: an index naming 100 000 distinct shards is refused at once, not after minutes") {
    scratch_dir dir;
    const std::string index = dir.path + "/model.safetensors.index.json";
    {
        std::string text = "{\"weight_map\":{";
        for (int i = 0; i < 100000; ++i) text += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":\"s" + std::to_string(i) + ".safetensors\"";
        text += "}}";
        attn_test::spit(index, text);
    }
    const auto start = std::chrono::steady_clock::now();
    const auto r = run_attn("inspect '" + index + "'");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + index + ": safetensors index: too many shards (expected at most 4096, got more)\n");
    CHECK(seconds < 5);  // 26 s before (a linear search of the shards for each name)
}

TEST_CASE("bombs: a character device is read in bounded blocks and refused as soon as it passes --max-bytes") {
    scratch_dir dir;
    // A node for the kernel's zero device (char 1:5), made in the scratch folder, never in /dev.
    const std::string zero = dir.path + "/zero";
    REQUIRE(::mknod(zero.c_str(), S_IFCHR | 0600, makedev(1, 5)) == 0);
    {
        FILE* f = std::fopen(zero.c_str(), "rb");  // a nodev mount would refuse it: the test could not run
        REQUIRE(f != nullptr);
        REQUIRE(std::fgetc(f) == 0);
        std::fclose(f);
    }
    const auto r = run_attn("compute --max-bytes 150M '" + zero + "' -o '" + dir.path + "/out.json'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + zero + ": file too large for --max-bytes (expected at most " +
                       std::to_string(150 * 1024 * 1024 + (1 << 20)) + " bytes, got more)\n");
    // 151 MiB held; a string grown by doubling held 128 + 256 MiB while it reallocated.
    CHECK(children_peak_mb() < attn_test::peak_bound_mb(200));
    CHECK_FALSE(std::filesystem::exists(dir.path + "/out.json"));
}

namespace {

/// A .npy of float32 zeros of `shape` (text) holding `count` elements: the header, then a
/// hole (a sparse file), so that the test writes no data of that size.
void write_sparse_f32_npy(const std::string& path, const std::string& shape, std::size_t count) {
    attn_test::spit(path, io_test::npy_v1("<f4", shape, ""));
    std::filesystem::resize_file(path, std::filesystem::file_size(path) + count * 4);
}

/// A float32 .npy of shape (1, T, 1) holding 0, 1/T, 2/T, …: X of one sequence, width 1.
void write_ramp_x(const std::string& path, std::size_t T) {
    std::string data(T * 4, '\0');
    for (std::size_t t = 0; t < T; ++t) {
        const float v = static_cast<float>(t) / static_cast<float>(T);
        std::memcpy(&data[t * 4], &v, 4);
    }
    attn_test::spit(path, io_test::npy_v1("<f4", "(1, " + std::to_string(T) + ", 1)", data));
}

/// `attn <args>` under /usr/bin/time: the result and that one child's peak RSS in MB.
std::pair<attn_test::run_result, double> run_measured(const scratch_dir& dir, const std::string& args) {
    const std::string rss = dir.path + "/rss.txt";
    std::filesystem::remove(rss);
    // Freed blocks waiting in AddressSanitizer's quarantine are not what a run holds.
    auto r = run_attn(args, "", attn_test::small_quarantine + "/usr/bin/time -f %M -o '" + rss + "' ");
    const std::string text = attn_test::slurp(rss);
    REQUIRE_MESSAGE(!text.empty(), "/usr/bin/time wrote no peak RSS");
    // /usr/bin/time puts "Command exited with non-zero status N" before the number.
    const std::size_t last = text.find_last_not_of("\n");
    const std::size_t start = text.find_last_of('\n', last);
    return {r, std::stod(text.substr(start == std::string::npos ? 0 : start + 1)) / 1024.0};
}

}  // namespace

TEST_CASE("bombs: --max-bytes bounds the Tq×Tk stages a run plans, before they are allocated, and output alone streams") {
    scratch_dir dir;
    const std::string x = dir.path + "/x.npy", out = dir.path + "/out.npz";
    const std::size_t T = 8192;  // 32 KB of X; one float32 T×T stage is 268 435 456 bytes
    write_ramp_x(x, T);
    auto [r, peak] = run_measured(dir, "compute --max-bytes 64M --dump weights '" + x + "' -o '" + out + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: this run needs about 268.4 MB for its Tq×Tk stages (B=1, H=1, Tq=Tk=8192, float32) "
                   "(expected at most --max-bytes 64 MiB; raise --max-bytes or dump fewer stages)\n");
    CHECK(peak < attn_test::peak_bound_mb(64));
    CHECK_FALSE(std::filesystem::exists(out));

    // Every kept stage counts: scores and weights, and the mask stage at a byte a cell (9 bytes a cell).
    std::tie(r, peak) = run_measured(dir, "compute --max-bytes 64M --dump scores,weights,mask '" + x + "' -o '" + out + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: this run needs about 604.0 MB for its Tq×Tk stages (B=1, H=1, Tq=Tk=8192, float32) "
                   "(expected at most --max-bytes 64 MiB; raise --max-bytes or dump fewer stages)\n");

    // No Tq×Tk stage: the streaming kernel holds one tile per thread, whatever T.
    std::tie(r, peak) = run_measured(dir, "compute --max-bytes 64M --dump output '" + x + "' -o '" + out + "'");
    CHECK_MESSAGE(r.code == 0, r.err);
    CHECK(peak < attn_test::peak_bound_mb(64));
    CHECK(std::filesystem::exists(out));
}

TEST_CASE("bombs: attn view plans its stages against --max-bytes, computed, or read as one array in pieces") {
    scratch_dir dir;
    const std::string x = dir.path + "/x.npz", page = dir.path + "/view.html";
    write_deflated_npz(x, {{"x", io_test::npy_v1("<f4", "(1, 4096, 1)", ""), 4096 * 4}});
    // view computes weights, scores and the mask: 4 + 4 + 1 bytes for each of 4096² cells.
    auto [r, peak] = run_measured(dir, "view --max-bytes 80M '" + x + "' -o '" + page + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: this run needs about 151.0 MB for its Tq×Tk stages (B=1, H=1, Tq=Tk=4096, float32) "
                   "(expected at most --max-bytes 80 MiB; raise --max-bytes or dump fewer stages)\n");
    CHECK(peak < attn_test::peak_bound_mb(64));
    CHECK_FALSE(std::filesystem::exists(page));

    // 48 MiB of weights pass the reader under 80M. Held, the page needed their double copy
    // for the head statistics (10 bytes a cell), a masked flag and ~5 × the 2-byte codes,
    // 264.2 MB, and was refused; a .npy file is read in pieces, holding one 2048² block.
    const std::string w = dir.path + "/w.npy";
    write_sparse_f32_npy(w, "(3, 2048, 2048)", std::size_t{3} << 22);
    std::tie(r, peak) = run_measured(dir, "view --max-bytes 80M '" + w + "' -o '" + page + "'");
    CHECK_MESSAGE(r.code == 0, r.err);
    CHECK(peak < attn_test::peak_bound_mb(64));
    CHECK(std::filesystem::exists(page));
    // Its plan is the block's: one 4096² head (16 Mi float32 cells and a flag a cell) does
    // not fit in 80M with the pieces read, and is refused before any is read.
    std::filesystem::remove(page);
    write_sparse_f32_npy(w, "(1, 4096, 4096)", std::size_t{1} << 24);
    std::tie(r, peak) = run_measured(dir, "view --max-bytes 80M '" + w + "' -o '" + page + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: this view needs about 90.2 MB for its Tq×Tk stages (weights (1, 4096, 4096) float32) "
                   "(expected at most --max-bytes 80 MiB; raise --max-bytes or view fewer stages, layers or heads)\n");
    CHECK(peak < attn_test::peak_bound_mb(64));
    CHECK_FALSE(std::filesystem::exists(page));
}

TEST_CASE("bombs: attn plot --head of a lone weights array copies out only the head it draws") {
    scratch_dir dir;
    const std::string w = dir.path + "/w.npy", png = dir.path + "/head.png";
    write_sparse_f32_npy(w, "(1, 16, 1024, 1024)", std::size_t{16} << 20);  // 64 MiB, 4 MiB a head
    const auto [r, peak] = run_measured(dir, "plot --max-bytes 80M --head 15 '" + w + "' -o '" + png + "'");
    CHECK_MESSAGE(r.code == 0, r.err);
    CHECK(std::filesystem::exists(png));
    // One head (4 MiB) is read; reading the file and then its array took 128 MiB and more.
    // (72: under AddressSanitizer the run peaks at 192–197 MB, its runtime's own ~130 MB
    // included, against 216; the defect is above 384 there.)
    CHECK(peak < attn_test::peak_bound_mb(72));

    // The head read in place is the head drawn: the same image as from the same array in
    // an .npz, which is read whole (its member named as the .npy, which names the colour
    // bar). Each head and batch item holds other values.
    std::string data;
    for (int i = 0; i < 2 * 3 * 4 * 5; ++i) {
        const float v = static_cast<float>((i * 37) % 120) / 120.0f;
        data.append(reinterpret_cast<const char*>(&v), 4);
    }
    const std::string small = dir.path + "/small.npy", zipped = dir.path + "/small.npz";
    attn_test::spit(small, io_test::npy_v1("<f4", "(2, 3, 4, 5)", data));
    write_deflated_npz(zipped, {{"small.npy", io_test::npy_v1("<f4", "(2, 3, 4, 5)", data), 0}});
    for (const std::string view : {"--batch 1 --head 2", "--batch 0 --head 1", "--batch 1 --grid"}) {
        CAPTURE(view);
        const std::string a = dir.path + "/a.svg", b = dir.path + "/b.svg";
        const auto ra = run_attn("plot '" + small + "' " + view + " --title t -o '" + a + "'");
        const auto rb = run_attn("plot '" + zipped + "' " + view + " --title t -o '" + b + "'");
        REQUIRE_MESSAGE(ra.code == 0, ra.err);
        REQUIRE_MESSAGE(rb.code == 0, rb.err);
        CHECK(attn_test::slurp(a) == attn_test::slurp(b));
    }
}

TEST_CASE("bombs: a checkpoint run with --layer all plans every layer's Tq×Tk stages, and their stack, unless streamed") {
    scratch_dir dir;
    const std::string out = dir.path + "/out.npz";
    std::string ids;
    for (int t = 0; t < 32; ++t) ids += (t ? "," : "") + std::to_string(t);
    const std::string run = "compute data/gpt2-tiny/model.safetensors --ids " + ids + " --dump weights,scores --max-bytes 125000 -o '" + out + "'";
    // One layer: two stages of 4 heads × 32² float32 = 2 × 16 384 bytes, within 125 000 bytes
    // (the tensors read take 120 832, wte 512 × 32 × 4 of them).
    auto r = run_attn(run + " --layer 1");
    CHECK_MESSAGE(r.code == 0, r.err);
    std::filesystem::remove(out);
    // Held output (.npz on stdout, which cannot seek): both layers are held, then stacked:
    // 2 stages × 2 layers × 2 × 16 384 bytes.
    const std::string held = "compute data/gpt2-tiny/model.safetensors --ids " + ids + " --dump weights,scores --max-bytes 125000";
    r = run_attn(held + " --layer all --format npz");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: this run needs about 131.1 kB for its Tq×Tk stages (L=2, B=1, H=4, Tq=Tk=32, float32) "
                   "(expected at most --max-bytes 125000 bytes; raise --max-bytes or dump fewer stages)\n");
    CHECK(r.out.empty());
    // A streamed .npz, JSON or CSV, or JSON Lines (docs/design.md §5.4) holds one layer at a time, within the limit.
    r = run_attn(run + " --layer all");
    CHECK_MESSAGE(r.code == 0, r.err);
    CHECK(std::filesystem::exists(out));
    for (const std::string ext : {"json", "csv", "jsonl"}) {
        CAPTURE(ext);
        r = run_attn(held + " --layer all --format " + ext + " -o '" + dir.path + "/out." + ext + "'");
        CHECK_MESSAGE(r.code == 0, r.err);
        CHECK(std::filesystem::exists(dir.path + "/out." + ext));
        // On stdout too, the spools in $TMPDIR.
        r = run_attn(held + " --layer all --format " + ext, "", "TMPDIR='" + dir.path + "' ");
        CHECK_MESSAGE(r.code == 0, r.err);
        CHECK(!r.out.empty());
    }
}

TEST_CASE("bombs: rollout, word_weights and head_stats of every layer hold one head's weights at a time, not a layer's or L layers'") {
    // data/llama-tiny, T = 128 ids, 4 heads: one head's weights are 128² float32 = 65 536 bytes
    // (the embedding table's size; the file's tensors are 102 656 bytes), one layer's 4 × 65 536 =
    // 262 144; held for both layers and stacked they would be planned at 4 × 262 144 bytes.
    scratch_dir dir;
    std::string ids;
    for (int t = 0; t < 128; ++t) ids += (t ? "," : "") + std::to_string(t % 64);
    const std::string run = "compute data/llama-tiny --layer all --ids " + ids + " --max-bytes 200000 -o '" + dir.path + "/out.json'";
    for (const char* dump : {"rollout", "head_stats", "head_stats,rollout,output"}) {
        CAPTURE(dump);
        const auto r = run_attn(run + " --dump " + dump);
        CHECK_MESSAGE(r.code == 0, r.err);
    }
    // Asked for, the weights themselves are held for every layer as before.
    auto r = run_attn(run + " --dump rollout,weights");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: this run needs about 1.0 MB for its Tq×Tk stages (L=2, B=1, H=4, Tq=Tk=128, float32) "
                   "(expected at most --max-bytes 200000 bytes; raise --max-bytes or dump fewer stages)\n");
    // A stage beside them that is a layer's Tq×Tk (the scores) takes the whole-layer path.
    r = run_attn("compute data/llama-tiny --layer 1 --ids " + ids + " --max-bytes 200000 --dump scores,head_stats");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: this run needs about 524.3 kB for its Tq×Tk stages (B=1, H=4, Tq=Tk=128, float32) "
                   "(expected at most --max-bytes 200000 bytes; raise --max-bytes or dump fewer stages)\n");
    // word_weights: a text of 128 tokens (the tokenizer's words), merged head by head.
    std::string text;
    for (int t = 0; t < 127; ++t) text += " a";
    r = run_attn("compute data/llama-tiny --layer all --text '" + text + "' --words --dump word_weights --max-bytes 200000 -o '" +
                 dir.path + "/words.json'");
    CHECK_MESSAGE(r.code == 0, r.err);
    // An attention call of its own: head_stats alone reads one head's weights at a time.
    const std::string x = dir.path + "/x.npy";
    write_sparse_f32_npy(x, "(128, 16)", 128 * 16);
    r = run_attn("compute --heads 4 --dump head_stats --max-bytes 200000 --mask causal '" + x + "'");
    CHECK_MESSAGE(r.code == 0, r.err);
}
