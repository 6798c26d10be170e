// Where the real binary writes: destinations that are not regular files are
// written in place and never replaced, /dev/stdout is stdout, --plot and -o must differ,
// batch outputs never share a name, stdin is read once, and a batch that cannot start
// its worker threads still finishes. Devices and FIFOs are made in a scratch directory;
// no test touches the real /dev entries.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "scratch_dir.hpp"
#include "skip.hpp"

using attn_test::run_attn;
using attn_test::scratch_dir;
using attn_test::slurp;

namespace {

std::vector<std::string> entries(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

TEST_CASE("-o a FIFO: the FIFO stays a FIFO and its reader receives the whole JSON document") {
    scratch_dir dir;
    const std::string fifo = dir.path + "/fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    std::string got;
    std::thread reader([&] { got = slurp(fifo); });
    const auto r = run_attn("compute --mask causal data/notebook.npz --dump weights -o '" + fifo + "'");
    reader.join();
    CHECK(r.code == 0);
    CHECK(r.err.empty());
    const auto doc = nlohmann::json::parse(got);
    CHECK(doc["weights"][0][0] == 1);
    struct stat st {};
    REQUIRE(::lstat(fifo.c_str(), &st) == 0);
    CHECK(S_ISFIFO(st.st_mode));
    CHECK(entries(dir.path) == std::vector<std::string>{"fifo"});
}

TEST_CASE("-o and --plot on a null device made by mknod: it stays that device") {
    scratch_dir dir;
    const std::string null = dir.path + "/null";
    if (::mknod(null.c_str(), S_IFCHR | 0666, ::makedev(1, 3)) != 0) {
        ATTN_SKIP("mknod needs root (CAP_MKNOD): no null device to write to");
    }
    for (const std::string args : {"compute data/x.npy -o '" + null + "'", "compute data/x.npy --format npz -o '" + null + "'",
                                   "plot data/notebook.npz -o '" + null + ".png'"}) {
        CAPTURE(args);
        if (args.rfind("plot", 0) == 0) REQUIRE(::mknod((null + ".png").c_str(), S_IFCHR | 0666, ::makedev(1, 3)) == 0);
        const auto r = run_attn(args);
        CHECK(r.code == 0);
        CHECK(r.err.empty());
    }
    for (const std::string p : {null, null + ".png"}) {
        struct stat st {};
        REQUIRE(::lstat(p.c_str(), &st) == 0);
        CHECK(S_ISCHR(st.st_mode));
        CHECK(st.st_rdev == ::makedev(1, 3));
    }
    CHECK(entries(dir.path) == std::vector<std::string>{"null", "null.png"});
}

TEST_CASE("-o a symbolic link to a file: the link stays, the file behind it gets the data") {
    scratch_dir dir;
    attn_test::spit(dir.path + "/real.json", "old");
    REQUIRE(::symlink("real.json", (dir.path + "/link.json").c_str()) == 0);
    const auto r = run_attn("compute data/x.npy --dump weights -o '" + dir.path + "/link.json'");
    CHECK(r.code == 0);
    struct stat st {};
    REQUIRE(::lstat((dir.path + "/link.json").c_str(), &st) == 0);
    CHECK(S_ISLNK(st.st_mode));
    CHECK(nlohmann::json::parse(slurp(dir.path + "/real.json")).contains("weights"));
    CHECK(entries(dir.path) == std::vector<std::string>{"link.json", "real.json"});
}

TEST_CASE("-o /dev/stdout writes to standard output") {
    const auto r = run_attn("compute --mask causal data/notebook.npz --dump weights --compact -o /dev/stdout");
    CHECK(r.code == 0);
    CHECK(nlohmann::json::parse(r.out)["weights"][0][0] == 1);
}

TEST_CASE("-o with a name of 250 bytes works and leaves no temporary") {
    scratch_dir dir;
    const std::string name = std::string(245, 'w') + ".json";
    const auto r = run_attn("compute data/x.npy --dump weights -o '" + dir.path + "/" + name + "'");
    CHECK(r.code == 0);
    CHECK(r.err.empty());
    CHECK(entries(dir.path) == std::vector<std::string>{name});
}

TEST_CASE("--plot naming the same file as -o is a usage error, and nothing is written") {
    scratch_dir dir;
    const std::string out = dir.path + "/w.png";
    auto r = run_attn("compute data/notebook.npz -o '" + out + "' --plot '" + out + "'");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: --plot: names the same file as -o (expected two different files, got " + out + ")\n");
    r = run_attn("compute data/notebook.npz -o '" + dir.path + "/./w.png' --plot '" + out + "'");
    CHECK(r.code == 2);
    CHECK(entries(dir.path).empty());
}

TEST_CASE("a batch into -o DIR/ never gives two inputs the same file: a-2.npy a.npy a.npy") {
    scratch_dir dir;
    for (const char* name : {"a-2.npy", "a.npy"})
        std::filesystem::copy_file(std::string(ATTN_SOURCE_DIR) + "/data/x.npy", dir.path + "/" + name);
    const std::string in = "'" + dir.path + "/a-2.npy' '" + dir.path + "/a.npy' '" + dir.path + "/a.npy'";
    const auto r = run_attn("compute " + in + " --dump weights -o '" + dir.path + "/out/'");
    CHECK(r.code == 0);
    CHECK(entries(dir.path + "/out") == std::vector<std::string>{"a-2-2.json", "a-2.json", "a.json"});
}

TEST_CASE("standard input is read once: a second - is a usage error") {
    auto r = run_attn("compute - -", "[[1, 2], [3, 4]]");
    CHECK(r.code == 2);
    CHECK(r.err == "attn: error: -: standard input can be read only once (expected at most one of INPUT - and "
                   "--manifest -, got 2)\n");
    r = run_attn("compute --manifest -", "{\"input\": \"-\"}\n");
    CHECK(r.code == 2);
    CHECK(r.out.empty());
}

TEST_CASE("a batch whose worker threads cannot be created warns once and finishes on the calling thread") {
    // A stack limit larger than memory makes every pthread_create fail (EAGAIN): glibc
    // sizes thread stacks by RLIMIT_STACK, and the kernel refuses such a mapping.
    const auto r = run_attn("compute --mask causal data/x.npy data/notebook.npz -j 2 --dump weights --compact",
                            "", "ulimit -s 100000000 && ");
    CHECK(r.code == 0);
    CHECK(r.err.rfind("attn: warning: cannot start worker thread 1 of 2 (Resource temporarily unavailable); "
                      "running with 1\n", 0) == 0);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    std::istringstream lines(r.out);
    std::string first, second;
    std::getline(lines, first);
    std::getline(lines, second);
    CHECK(nlohmann::json::parse(first)["input"] == "data/x.npy");
    CHECK(nlohmann::json::parse(second)["weights"][0][0] == 1);
}

TEST_CASE("--plot: a run whose -o cannot be written leaves no plot behind") {
    attn_test::scratch_dir dir;
    const std::string plot = dir.path + "/p.png", out = dir.path + "/missing/out.json";
    const auto r = attn_test::run_attn("compute data/x.npy --plot '" + plot + "' -o '" + out + "'");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + out + ": cannot write file (No such file or directory)\n");
    CHECK_FALSE(std::filesystem::exists(plot));
    // With a writable -o, both are written.
    const auto ok = attn_test::run_attn("compute data/x.npy --plot '" + plot + "' -o '" + dir.path + "/out.json'");
    CHECK(ok.code == 0);
    CHECK(std::filesystem::exists(plot));
}

TEST_CASE("-o: a write that fails part way (a file size limit, as a full disk) names the file and the reason") {
    attn_test::scratch_dir dir;
    const std::string out = dir.path + "/out.json";
    // `ulimit -f 1` (512-byte blocks) makes writes past 1 KiB fail with EFBIG once SIGXFSZ is ignored.
    const auto r = attn_test::run_attn("compute data/notebook.npz --dump q,k,v,scores,weights,output -o '" + out + "'", "",
                                       "trap '' XFSZ && ulimit -f 1 && ");
    CHECK(r.code == 1);
    CHECK(r.err == "attn: error: " + out + ": cannot write output (File too large)\n");
    CHECK_FALSE(std::filesystem::exists(out));
    CHECK(std::distance(std::filesystem::directory_iterator(dir.path), std::filesystem::directory_iterator{}) == 0);
}
