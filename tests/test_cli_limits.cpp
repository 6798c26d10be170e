// `--max-bytes` through the real binary: a declared array size over the limit is refused
// before anything is allocated, with one line and exit code 1 (attn/io/limits.hpp).

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <string>

#include "cli_util.hpp"

using attn_test::run_attn;

namespace {

/// An absolute scratch directory, removed with its files at scope exit.
struct scratch {
    std::string dir;
    scratch() {
        char templ[] = "/tmp/attn-test-limits-XXXXXX";
        REQUIRE(mkdtemp(templ) != nullptr);
        dir = templ;
    }
    ~scratch() { std::system(("rm -rf '" + dir + "'").c_str()); }
};

/// A .npy holding only a header (version 1.0) that declares `shape` of float64.
std::string npy_header_only(const std::string& shape) {
    std::string h = "{'descr': '<f8', 'fortran_order': False, 'shape': " + shape + ", }";
    h.append(64 - (10 + h.size() + 1) % 64, ' ');
    h += '\n';
    std::string s = "\x93NUMPY\x01";
    s += '\0';
    s += static_cast<char>(h.size() & 0xff);
    s += static_cast<char>(h.size() >> 8);
    return s + h;
}

std::string too_large(const std::string& source, const std::string& max, const std::string& got) {
    return "attn: error: " + source + ": array too large for --max-bytes (expected at most " + max + " bytes, got " +
           got + ")\n";
}

}  // namespace

TEST_CASE("--max-bytes: a huge declared .npy is refused from its header, exit 1") {
    scratch s;
    const std::string big = s.dir + "/big.npy";
    attn_test::spit(big, npy_header_only("(65536, 65536)"));  // 32 GiB declared, 128 bytes on disk
    const auto r = run_attn("compute --max-bytes 1G '" + big + "'");
    CHECK(r.code == 1);
    CHECK(r.err == too_large(big, "1073741824", "34359738368"));
    CHECK(r.out.empty());
}

TEST_CASE("--max-bytes: the limit applies to .npy, .npz members, JSON arrays and per-array options") {
    struct limit_case {
        const char* args;
        const char* source;
        const char* max;
    };
    const limit_case cases[] = {
        {"compute --max-bytes 255 data/x.npy", "data/x.npy", "255"},
        {"compute --max-bytes 200 data/notebook.npz", "data/notebook.npz:q", "200"},
        {"compute --max-bytes 100 data/notebook.json", "data/notebook.json:q", "100"},
        {"compute --q data/notebook.npz:q --k data/notebook.npz:k --v data/notebook.npz:v --max-bytes 0",
         "data/notebook.npz:q", "0"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.args);
        const auto r = run_attn(c.args);
        CHECK(r.code == 1);
        CHECK(r.err == too_large(c.source, c.max, "256"));
        CHECK(r.out.empty());
    }
}

TEST_CASE("--max-bytes: sizes with suffixes; the limit is inclusive") {
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
    const auto r = run_attn("compute --help");
    CHECK(r.code == 0);
    CHECK(r.out.find("--max-bytes") != std::string::npos);
    CHECK(r.out.find("half of physical memory") != std::string::npos);
}
