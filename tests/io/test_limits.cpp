// The readers' size limit (attn/io/limits.hpp): every reader refuses an array over
// max_array_bytes() from its declared size, before allocating it, with one message.

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "scratch_dir.hpp"
#include "attn/error.hpp"
#include "attn/io/input.hpp"
#include "attn/io/json.hpp"
#include "attn/io/limits.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "io_fixtures.hpp"

using attn::value_error;

namespace {

/// Sets the limit for one test and restores the previous one.
struct limit_guard {
    std::size_t saved = attn::io::max_array_bytes();
    explicit limit_guard(std::size_t n) { attn::io::set_max_array_bytes(n); }
    ~limit_guard() { attn::io::set_max_array_bytes(saved); }
};

std::string too_large(const std::string& source, std::size_t max, std::size_t got) {
    return source + ": array too large for --max-bytes (expected at most " + std::to_string(max) + " bytes, got " +
           std::to_string(got) + ")";
}

}  // namespace

TEST_CASE("limits: the default is a quarter of physical memory") {
    // A file is held whole while its arrays are decoded: twice the limit must fit.
    const std::size_t phys = static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) *
                             static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    CHECK(attn::io::default_max_array_bytes() == phys / 4);
    limit_guard g(123);
    CHECK(attn::io::max_array_bytes() == 123);
}

TEST_CASE("limits: read_npy refuses a declared size over the limit before reading data") {
    limit_guard g(1 << 30);
    // 65536 x 65536 float64 = 32 GiB declared, no data present: the limit, not the
    // truncation, is reported.
    const std::string big = io_test::npy_v1("<f8", "(65536, 65536)", "");
    CHECK_THROWS_WITH_AS(attn::io::read_npy(big, "big.npy"), too_large("big.npy", 1 << 30, 34359738368ULL).c_str(),
                         value_error);
    CHECK_THROWS_WITH_AS(attn::io::check_npy_head(big, "big.npy"),
                         too_large("big.npy", 1 << 30, 34359738368ULL).c_str(), value_error);
    // Within the limit, a short file is still a truncation (and check_npy_head is silent).
    const std::string small = io_test::npy_v1("<f4", "(2, 3)", std::string(8, '\0'));
    CHECK_THROWS_AS(attn::io::read_npy(small, "small.npy"), attn::format_error);
    CHECK_NOTHROW(attn::io::check_npy_head(small, "small.npy"));
}

TEST_CASE("limits: the boundary is inclusive") {
    const std::string f = io_test::npy_v1("<f8", "(4, 8)", std::string(256, '\0'));
    {
        limit_guard g(256);
        CHECK(attn::io::read_npy(f, "x.npy").size() == 32);
    }
    limit_guard g(255);
    CHECK_THROWS_WITH_AS(attn::io::read_npy(f, "x.npy"), too_large("x.npy", 255, 256).c_str(), value_error);
}

TEST_CASE("limits: .npz members and JSON arrays") {
    std::ostringstream out;
    attn::array a = attn::array::from<double>({4, 8}, std::vector<double>(32, 1.0).data());
    attn::io::write_npz(out, {{"q", a}});
    limit_guard g(100);
    CHECK_THROWS_WITH_AS(attn::io::read_npz(out.str(), "b.npz"), too_large("b.npz:q", 100, 256).c_str(), value_error);
    // JSON: int64 and float64 elements are 8 bytes, bool 1.
    CHECK_THROWS_WITH_AS(attn::io::read_json(R"({"q": [[1,2,3,4,5,6,7,8,9,10,11,12,13]]})", "b.json"),
                         too_large("b.json:q", 100, 104).c_str(), value_error);
    CHECK_THROWS_WITH_AS(attn::io::read_json("[1.5,2,3,4,5,6,7,8,9,10,11,12,13]", "b.json"),
                         too_large("b.json", 100, 104).c_str(), value_error);
    CHECK(attn::io::read_json("[[true,false,true,false,true,false,true,false,true,false,true,false,true]]", "b.json")
              .arrays.front()
              .value.data.size() == 13);
}

TEST_CASE("limits: a large .npz member is refused from its header, before the rest is read") {
    // A 2 MiB member is read in 1 MiB chunks; the first already shows that the array is
    // too large (the message is the one read_npy would give after reading it all).
    std::ostringstream out;
    attn::array a = attn::array::from<double>({512, 512}, std::vector<double>(512 * 512, 0.0).data());
    attn::io::write_npz(out, {{"k", a}});
    limit_guard g(1000);
    CHECK_THROWS_WITH_AS(attn::io::read_npz(out.str(), "z.npz"), too_large("z.npz:k", 1000, 2097152).c_str(),
                         value_error);
}

TEST_CASE("limits: files larger than the limit plus file_overhead_bytes are not read") {
    const attn_test::scratch_dir scratch;
    const std::string dir = scratch.path;
    limit_guard g(1024);
    const std::size_t max_file = 1024 + attn::io::file_overhead_bytes;
    {
        // JSON (or anything but .npy): the file's size is reported.
        const std::string path = dir + "/big.json";
        std::ofstream(path) << "[" << std::string(max_file, ' ') << "1]";
        CHECK_THROWS_WITH_AS(attn::io::read_file(path),
                             (path + ": file too large for --max-bytes (expected at most " + std::to_string(max_file) +
                              " bytes, got " + std::to_string(max_file + 3) + ")")
                                 .c_str(),
                             value_error);
        std::remove(path.c_str());
    }
    {
        // A .npy: its header names the array's size.
        const std::string path = dir + "/big.npy";
        std::ofstream(path, std::ios::binary)
            << io_test::npy_v1("<f8", "(2048, 128)", std::string(2048 * 128 * 8, '\0'));
        CHECK_THROWS_WITH_AS(attn::io::load_bundle(path), too_large(path, 1024, 2097152).c_str(), value_error);
        std::remove(path.c_str());
    }
    ::rmdir(dir.c_str());
}
