// `--max-bytes` through the real binary: a declared array size over the limit is refused
// before anything is allocated, with one line and exit code 1 (attn/io/limits.hpp).

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <initializer_list>
#include <string>

#include "cli_util.hpp"
#include "io_fixtures.hpp"

using attn_test::run_attn;

namespace {

/// An absolute scratch directory, removed with its files at scope exit.
struct scratch {
    std::string dir;
    scratch() {
        dir = attn_test::temp_dir();
    }
    ~scratch() { std::system(("rm -rf '" + dir + "'").c_str()); }
};

std::string too_large(const std::string& source, const std::string& max, const std::string& got) {
    return "attn: error: " + source + ": array too large for --max-bytes (expected at most " + max + " bytes, got " +
           got + ")\n";
}

/// A command whose input `source` (256 bytes) is over `max`.
struct limit_case {
    const char* args;
    const char* source;
    const char* max;
};

/// Each command exits 1 with the too-large message and writes nothing.
void check_refused(std::initializer_list<limit_case> cases) {
    for (const auto& c : cases) {
        CAPTURE(c.args);
        const auto r = run_attn(c.args);
        CHECK(r.code == 1);
        CHECK(r.err == too_large(c.source, c.max, "256"));
        CHECK(r.out.empty());
    }
}

}  // namespace

TEST_CASE("--max-bytes: a huge declared .npy is refused from its header, exit 1") {
    scratch s;
    const std::string big = s.dir + "/big.npy";
    attn_test::spit(big, io_test::npy_v1("<f8", "(65536, 65536)", ""));  // 32 GiB declared, 128 bytes on disk
    const auto r = run_attn("compute --max-bytes 1G '" + big + "'");
    CHECK(r.code == 1);
    CHECK(r.err == too_large(big, "1073741824", "34359738368"));
    CHECK(r.out.empty());
}

TEST_CASE("--max-bytes: the limit applies to .npy, .npz members, JSON arrays and per-array options") {
    check_refused({
        {"compute --max-bytes 255 data/x.npy", "data/x.npy", "255"},
        {"compute --max-bytes 200 data/notebook.npz", "data/notebook.npz:q", "200"},
        {"compute --max-bytes 100 data/notebook.json", "data/notebook.json:q", "100"},
        {"compute --q data/notebook.npz:q --k data/notebook.npz:k --v data/notebook.npz:v --max-bytes 0",
         "data/notebook.npz:k", "0"},
    });
}

TEST_CASE("--max-bytes: inspect and compare refuse an input over the limit as compute does, but inspect reads .npy and .npz in pieces") {
    check_refused({
        {"inspect --max-bytes 100 data/notebook.json", "data/notebook.json:q", "100"},
        {"compare --max-bytes 255 data/x.npy data/x.npy", "data/x.npy", "255"},
        // Only the member asked for is read.
        {"compare --max-bytes 200 data/notebook.npz:k data/notebook.npz:k", "data/notebook.npz:k", "200"},
        {"compare --max-bytes 100 data/notebook.json:v data/notebook.json:v", "data/notebook.json:q", "100"},
    });
    // inspect holds no .npy or .npz array whole (a piece of at most --max-bytes at a time):
    // the listing under the limit is the one without it.
    for (const char* file : {"data/x.npy", "data/notebook.npz"}) {
        CAPTURE(file);
        const auto limited = run_attn(std::string("inspect --format json --max-bytes 100 ") + file);
        CHECK(limited.code == 0);
        CHECK(limited.err.empty());
        CHECK(limited.out == run_attn(std::string("inspect --format json ") + file).out);
    }
    // The limit is inclusive, and a bad size is a usage error, as for compute.
    for (const char* args : {"inspect --max-bytes 256 data/x.npy", "compare --max-bytes 256 data/x.npy data/x.npy"}) {
        CAPTURE(args);
        const auto r = run_attn(args);
        CHECK(r.code == 0);
        CHECK(r.err.empty());
    }
    for (const char* args : {"inspect --max-bytes lots data/x.npy", "compare --max-bytes lots data/x.npy data/x.npy"}) {
        CAPTURE(args);
        const auto r = run_attn(args);
        CHECK(r.code == 2);
        CHECK(r.err == "attn: error: --max-bytes: not a size (expected a number of bytes, or with K, M, G or T like "
                       "512M, got lots)\n");
    }
}

TEST_CASE("--max-bytes: inspect reports the file over the limit and still lists the others") {
    scratch s;
    const std::string small = s.dir + "/small.json";
    attn_test::spit(small, "[[1, 2]]");
    const auto r = run_attn("inspect --format json --max-bytes 100 data/notebook.json '" + small + "'");
    CHECK(r.code == 1);
    CHECK(r.err == too_large("data/notebook.json:q", "100", "256"));
    CHECK(r.out == "{\"file\":\"data/notebook.json\",\"error\":\"data/notebook.json:q: array too large for --max-bytes (expected at most "
                   "100 bytes, got 256)\"}\n{\"file\":\"" + small + "\",\"arrays\":[{\"name\":null,\"dtype\":\"int64\","
                   "\"shape\":[1,2],\"byte_order\":\"n/a\",\"count\":2,\"min\":1.0,\"max\":2.0,\"mean\":1.5,\"std\":0.5,"
                   "\"nan\":0,\"posinf\":0,\"neginf\":0}]}\n");
}

TEST_CASE("--max-bytes: a JSON array under a name attn does not use is refused too, as an .npz member is") {
    scratch s;
    const std::string data = s.dir + "/data.json";
    attn_test::spit(data, "{\"data\": [[1.5, 2.5], [3.5, 4.5]]}");  // a lone unknown name: X
    const std::string out = s.dir + "/out.json";
    REQUIRE(run_attn("compute --mask causal data/notebook.npz --dump scores,weights,stats -o '" + out + "'").code == 0);
    struct limit_case {
        std::string args;
        std::string source;
        const char* max;
        const char* got;
    };
    // The first array over the limit in file order is named: in attn's output, scores.
    const limit_case cases[] = {
        {"compute --max-bytes 31 '" + data + "'", data + ":data", "31", "32"},
        {"inspect --max-bytes 31 '" + data + "'", data + ":data", "31", "32"},
        {"compare --max-bytes 31 '" + data + "' '" + data + "'", data + ":data", "31", "32"},
        {"inspect --max-bytes 127 '" + out + "'", out + ":scores", "127", "128"},
        {"compare --max-bytes 127 '" + out + ":weights' '" + out + ":weights'", out + ":scores", "127", "128"},
        {"compare --max-bytes 127 '" + out + ":stats.var_qk' '" + out + ":stats.var_qk'", out + ":scores", "127",
         "128"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.args);
        const auto r = run_attn(c.args);
        CHECK(r.code == 1);
        CHECK(r.err == too_large(c.source, c.max, c.got));
        CHECK(r.out.empty());
    }
}

TEST_CASE("--max-bytes: sizes with suffixes, the limit is inclusive") {
    for (const char* n : {"256", "1K", "1k", "512M", "2G", "1T", "1KiB"}) {
        CAPTURE(n);
        const auto r = run_attn(std::string("compute --max-bytes ") + n + " data/x.npy");
        CHECK(r.code == 0);
        CHECK(r.err.empty());
    }
    for (const char* n : {"lots", "-5", "2X", "16E", "99999999999999999999"}) {
        CAPTURE(n);
        const auto r = run_attn(std::string("compute --max-bytes ") + n + " data/x.npy");
        CHECK(r.code == 2);
        CHECK(r.err == std::string("attn: error: --max-bytes: not a size (expected a number of bytes, or with K, M, G "
                                   "or T like 512M, got ") + n + ")\n");
        CHECK(r.out.empty());
    }
}

TEST_CASE("--max-bytes: a file (or stdin) far over the limit is not read at all") {
    scratch s;
    const std::string big = s.dir + "/big.json";
    attn_test::spit(big, "[" + std::string(2 << 20, ' ') + "1]");
    auto r = run_attn("compute --max-bytes 1K '" + big + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + big + ": file too large for --max-bytes (expected at most 1049600 bytes, got " +
                       std::to_string((2 << 20) + 3) + ")\n");
    r = run_attn("compute --max-bytes 1K -", "[" + std::string(2 << 20, ' ') + "1]");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: <stdin>: file too large for --max-bytes (expected at most 1049600 bytes, got more)\n");
}

TEST_CASE("--max-bytes is documented in --help with its default") {
    for (const char* command : {"compute", "plot", "inspect", "compare"}) {
        CAPTURE(command);
        const auto r = run_attn(std::string(command) + " --help");
        CHECK(r.code == 0);
        CHECK(r.out.find("--max-bytes") != std::string::npos);
        CHECK(attn_test::joined_words(r.out).find("a quarter of physical memory") != std::string::npos);
    }
}
