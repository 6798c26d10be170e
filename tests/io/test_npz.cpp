// Tests for include/attn/io/npz.hpp: archives written by np.savez / np.savez_compressed,
// broken archives and members, and the writer's round trip.

#include <doctest/doctest.h>

#include <sstream>

#include "attn/error.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "io_fixtures.hpp"

using attn::format_error;
using attn::io::named_array;
using attn::io::read_npz;
using attn::io::write_npz;

TEST_CASE("npz: reader matches NumPy for np.savez and np.savez_compressed") {
    const auto& entries = io_test::expected().at("npz");
    REQUIRE(entries.size() == 3);
    for (const auto& entry : entries) {
        const std::string file = entry.at("file").get<std::string>();
        CAPTURE(file);
        const std::string bytes = io_test::slurp(io_test::fixture_path(file));
        CHECK(attn::io::is_zip(bytes));
        const auto arrays = read_npz(bytes, file);
        const auto& want = entry.at("arrays");
        REQUIRE(arrays.size() == want.size());
        for (std::size_t i = 0; i < arrays.size(); ++i) {
            CAPTURE(i);
            CHECK(arrays[i].name == want[i].at("name").get<std::string>());  // archive order, case kept
            io_test::check_against_numpy(arrays[i].value, want[i]);
        }
    }
}

TEST_CASE("npz: is_zip") {
    CHECK(attn::io::is_zip(std::string("PK\x03\x04", 4)));
    CHECK(attn::io::is_zip(std::string("PK\x05\x06", 4)));
    CHECK_FALSE(attn::io::is_zip("PK"));
    CHECK_FALSE(attn::io::is_zip("\x93NUMPY"));
}

TEST_CASE("npz: members that are not .npy are skipped, a broken member names itself") {
    const std::string path = io_test::fixture_path("npz/bad_member.npz");
    const std::string bytes = io_test::slurp(path);
    CHECK_THROWS_WITH_AS(read_npz(bytes, "b.npz"), "b.npz:bad: truncated .npy header (expected 10 bytes, got 8)",
                         format_error);
}

TEST_CASE("npz: a member declaring an impossible uncompressed size is not read") {
    const std::string bytes = io_test::slurp(io_test::fixture_path("npz/huge_declared.npz"));
    CHECK_THROWS_WITH_AS(read_npz(bytes, "h.npz"),
                         "h.npz:x: implausible member size (expected at most 174928 bytes, got 4026531840)",
                         format_error);
}

TEST_CASE("npz: broken archives") {
    const std::string good = io_test::slurp(io_test::fixture_path("npz/savez.npz"));
    CHECK_THROWS_WITH_AS(read_npz(good.substr(0, good.size() / 2), "t.npz"),
                         "t.npz: not a valid .npz archive (not a zip archive)", format_error);
    CHECK_THROWS_WITH_AS(read_npz(std::string("PK\x03\x04garbage", 11), "t.npz"),
                         "t.npz: not a valid .npz archive (not a zip archive)", format_error);
    CHECK_THROWS_WITH_AS(read_npz("", "t.npz"), "t.npz: not a valid .npz archive (not a zip archive)", format_error);

    // Flip one data byte of a stored member: the CRC no longer matches.
    std::string corrupt = good;
    const std::size_t data = corrupt.find("\x93NUMPY");
    REQUIRE(data != std::string::npos);
    corrupt[data + 200] = static_cast<char>(corrupt[data + 200] ^ 0x55);
    CHECK_THROWS_WITH_AS(read_npz(corrupt, "t.npz"), "t.npz:q: cannot read member (CRC error)", format_error);

    // Every prefix fails cleanly (an attn::error, no crash).
    for (std::size_t n = 0; n < good.size(); n += 7) {
        CAPTURE(n);
        CHECK_THROWS_AS(read_npz(good.substr(0, n), "t.npz"), attn::error);
    }
}

TEST_CASE("npz: writer round trip") {
    const float f[] = {0.5f, -1.25f, 3.0f, 1e-8f, -0.0f, 7.0f};
    const double d[] = {1.0 / 3.0, -2.0};
    attn::array mask;
    mask.type = attn::dtype::b1;
    mask.shape = {2, 2};
    mask.data = {std::byte{1}, std::byte{0}, std::byte{1}, std::byte{1}};
    const std::vector<named_array> arrays = {{"weights", attn::array::from<float>({1, 2, 3}, f)},
                                             {"lse", attn::array::from<double>({2}, d)},
                                             {"mask", mask}};
    std::ostringstream out;
    write_npz(out, arrays);
    const std::string bytes = out.str();
    CHECK(bytes.substr(0, 4) == std::string("PK\x03\x04", 4));
    CHECK(bytes.find("weights.npy") != std::string::npos);
    // Stored, not deflated: the members' .npy bytes are in the archive verbatim.
    std::ostringstream member;
    attn::io::write_npy(member, arrays[0].value);
    CHECK(bytes.find(member.str()) != std::string::npos);

    const auto back = read_npz(bytes, "w.npz");
    REQUIRE(back.size() == arrays.size());
    for (std::size_t i = 0; i < back.size(); ++i) {
        CAPTURE(i);
        CHECK(back[i].name == arrays[i].name);
        CHECK(back[i].value.type == arrays[i].value.type);
        CHECK(back[i].value.shape == arrays[i].value.shape);
        CHECK(back[i].value.data == arrays[i].value.data);
    }

    // The output is reproducible (fixed member time stamps).
    std::ostringstream again;
    write_npz(again, arrays);
    CHECK(again.str() == bytes);
}

TEST_CASE("npz: writing no arrays gives an empty archive NumPy can open") {
    std::ostringstream out;
    write_npz(out, {});
    const std::string bytes = out.str();
    CHECK(bytes == std::string("PK\x05\x06", 4) + std::string(18, '\0'));
    CHECK(read_npz(bytes, "e.npz").empty());
}
