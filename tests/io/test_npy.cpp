// Tests for include/attn/io/npy.hpp: the reader against every NumPy-written fixture, the
// writer byte for byte against np.save, and the exact message for each kind of bad file.

#include <doctest/doctest.h>

#include <sstream>

#include "attn/error.hpp"
#include "attn/io/npy.hpp"
#include "io_fixtures.hpp"

using attn::format_error;
using attn::value_error;
using attn::io::read_npy;
using attn::io::write_npy;

namespace {

/// A .npy file: magic, version, header length, `header` + "\n", then `data`.
std::string make_npy(const std::string& header, const std::string& data, int major = 1) {
    std::string h = header + "\n";
    std::string s = "\x93NUMPY";
    s += static_cast<char>(major);
    s += '\0';
    const std::size_t width = major == 1 ? 2 : 4;
    for (std::size_t i = 0; i < width; ++i) s += static_cast<char>((h.size() >> (8 * i)) & 0xff);
    return s + h + data;
}

std::string header_for(const std::string& descr, const std::string& shape, const std::string& fortran = "False") {
    return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

std::string bytes_of(const std::vector<double>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
}

std::string written(const attn::array& a) {
    std::ostringstream out;
    write_npy(out, a);
    return out.str();
}

}  // namespace

TEST_CASE("npy: reader matches NumPy on the fixture matrix") {
    const auto& entries = io_test::expected().at("npy");
    REQUIRE(entries.size() > 150);  // the whole matrix, not a lucky subset
    for (const auto& entry : entries) {
        const std::string file = entry.at("file").get<std::string>();
        CAPTURE(file);
        const std::string bytes = io_test::slurp(io_test::fixture_path(file));
        CHECK(attn::io::is_npy(bytes));
        io_test::check_against_numpy(read_npy(bytes, file), entry);
    }
}

TEST_CASE("npy: writer output is byte-identical to np.save") {
    int compared = 0;
    for (const auto& entry : io_test::expected().at("npy")) {
        const std::string file = entry.at("file").get<std::string>();
        CAPTURE(file);
        const std::string bytes = io_test::slurp(io_test::fixture_path(file));
        const attn::array a = read_npy(bytes, file);
        const std::string out = written(a);
        // np.save writes little-endian C-order arrays as they are; attn writes every array
        // that way, so only those fixtures can match byte for byte. The others round-trip.
        const bool numpy_wrote_same_layout =
            file.rfind("npy/v", 0) != 0 && (file.find("_le_C_") != std::string::npos ||
                                             file.find("_na_C_") != std::string::npos);
        if (numpy_wrote_same_layout) {
            CHECK(out == bytes);
            ++compared;
        }
        CHECK(out.size() % 64 == (a.data.size() % 64));  // data starts at a multiple of 64
        const attn::array back = read_npy(out, "written");
        CHECK(back.type == a.type);
        CHECK(back.shape == a.shape);
        CHECK(back.data == a.data);
    }
    CHECK(compared > 50);
}

TEST_CASE("npy: writer header") {
    const double v[] = {1.5, -2.0};
    const std::string out = written(attn::array::from<double>({2}, v));
    CHECK(out.substr(0, 10) == std::string("\x93NUMPY\x01\x00\x76\x00", 10));
    CHECK(out.substr(10, 60) == "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }   ");
    CHECK(out.size() == 128 + 16);
    CHECK(out[127] == '\n');
}

TEST_CASE("npy: tolerated header spellings") {
    const std::string data = bytes_of({1, 2, 3, 4, 5, 6});
    SUBCASE("keys in any order, double quotes, no trailing comma, extra whitespace") {
        const auto a = read_npy(make_npy("  {\"shape\" : ( 2 ,3 ) ,\n 'fortran_order':False,'descr':\"<f8\"}   \n  ", data),
                                "t.npy");
        CHECK(a.shape == attn::shape_t{2, 3});
        CHECK(a.value(5) == 6.0);
    }
    SUBCASE("Python 2 long integers") {
        CHECK(read_npy(make_npy(header_for("<f8", "(2L, 3L)"), data), "t.npy").shape == attn::shape_t{2, 3});
    }
    SUBCASE("native byte order marks") {
        CHECK(read_npy(make_npy(header_for("=f8", "(6,)"), data), "t.npy").value(2) == 3.0);
        CHECK(read_npy(make_npy(header_for("|f8", "(6,)"), data), "t.npy").value(2) == 3.0);
        CHECK(read_npy(make_npy(header_for("f8", "(6,)"), data), "t.npy").value(2) == 3.0);
    }
    SUBCASE("0-d and empty shapes") {
        const auto s = read_npy(make_npy(header_for("<f8", "()"), bytes_of({7})), "t.npy");
        CHECK(s.rank() == 0);
        CHECK(s.value(0) == 7.0);
        const auto e = read_npy(make_npy(header_for("<f8", "(0, 3)"), ""), "t.npy");
        CHECK(e.shape == attn::shape_t{0, 3});
        CHECK(e.data.empty());
    }
    SUBCASE("versions 2.0 and 3.0") {
        CHECK(read_npy(make_npy(header_for("<f8", "(6,)"), data, 2), "t.npy").value(5) == 6.0);
        CHECK(read_npy(make_npy(header_for("<f8", "(6,)"), data, 3), "t.npy").value(5) == 6.0);
    }
    SUBCASE("bool bytes other than 0 and 1 read as True") {
        const auto a = read_npy(make_npy(header_for("|b1", "(3,)"), std::string("\x00\x02\x01", 3)), "t.npy");
        CHECK(a.data == std::vector<std::byte>{std::byte{0}, std::byte{1}, std::byte{1}});
    }
    SUBCASE("Fortran order in big-endian") {
        // NumPy: np.asfortranarray(np.arange(6, dtype='>i2').reshape(2, 3))
        const std::string be_f("\x00\x00\x00\x03\x00\x01\x00\x04\x00\x02\x00\x05", 12);
        const auto a = read_npy(make_npy(header_for(">i2", "(2, 3)", "True"), be_f), "t.npy");
        CHECK(a.type == attn::dtype::i2);
        for (std::size_t i = 0; i < 6; ++i) CHECK(a.value(i) == static_cast<double>(i));
    }
}

TEST_CASE("npy: malformed files are rejected with exact messages") {
    const std::string f8x6 = bytes_of({1, 2, 3, 4, 5, 6});

    SUBCASE("magic") {
        CHECK_THROWS_WITH_AS(read_npy(std::string("PK\x03\x04\x14\x00rest", 10), "t.npy"),
                             "t.npy: not a .npy file (expected magic \\x93NUMPY, got PK\\x03\\x04\\x14\\x00)",
                             format_error);
        CHECK_THROWS_WITH_AS(read_npy("", "t.npy"),
                             "t.npy: not a .npy file (expected magic \\x93NUMPY, got an empty file)", format_error);
        CHECK_THROWS_WITH_AS(read_npy("\x93NUM", "t.npy"),
                             "t.npy: not a .npy file (expected magic \\x93NUMPY, got \\x93NUM)", format_error);
    }
    SUBCASE("version and preamble") {
        CHECK_THROWS_WITH_AS(read_npy("\x93NUMPY", "t.npy"),
                             "t.npy: truncated .npy header (expected 8 bytes, got 6)", format_error);
        CHECK_THROWS_WITH_AS(read_npy(std::string("\x93NUMPY\x04\x00\x10\x00", 10), "t.npy"),
                             "t.npy: unsupported .npy version (expected 1.0, 2.0 or 3.0, got 4.0)", format_error);
        CHECK_THROWS_WITH_AS(read_npy(std::string("\x93NUMPY\x01\x01\x10\x00", 10), "t.npy"),
                             "t.npy: unsupported .npy version (expected 1.0, 2.0 or 3.0, got 1.1)", format_error);
        CHECK_THROWS_WITH_AS(read_npy(std::string("\x93NUMPY\x02\x00\x10\x00", 10), "t.npy"),
                             "t.npy: truncated .npy header (expected 12 bytes, got 10)", format_error);
    }
    SUBCASE("header longer than the file") {
        const std::string full = make_npy(header_for("<f8", "(6,)"), f8x6);
        CHECK_THROWS_WITH_AS(read_npy(full.substr(0, 50), "t.npy"),
                             "t.npy: truncated .npy header (expected 68 bytes, got 50)", format_error);
    }
    SUBCASE("header syntax") {
        CHECK_THROWS_WITH_AS(read_npy(make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (6,)", f8x6), "t.npy"),
                             "t.npy: bad .npy header (expected ',' or '}', got end of header)", format_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy("{'descr' '<f8'}", f8x6), "t.npy"),
                             "t.npy: bad .npy header (expected ':', got '<f8')", format_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy(header_for("<f8", "(6,)", "Fals"), f8x6), "t.npy"),
                             "t.npy: bad .npy header (expected a value, got Fals)", format_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy(header_for("<f8", "(6,)") + " x", f8x6), "t.npy"),
                             "t.npy: bad .npy header (expected end of header, got x)", format_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy("['descr']", f8x6), "t.npy"),
                             "t.npy: bad .npy header (expected a dict, got [)", format_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy("{descr: '<f8'}", f8x6), "t.npy"),
                             "t.npy: bad .npy header (expected a string key or '}', got descr)", format_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy("{'descr: '<f8'}", f8x6), "t.npy"),
                             "t.npy: bad .npy header (expected ':', got <)", format_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy("{'descr': '<f8", f8x6), "t.npy"),
                             "t.npy: bad .npy header (expected a closed string, got '<f8)", format_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy(header_for("<f8", "(2.5,)"), f8x6), "t.npy"),
                             "t.npy: bad .npy header (expected ',' or ')', got .)", format_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy(header_for("<f8", "(6,)") + std::string("\0", 1), f8x6), "t.npy"),
                             "t.npy: bad .npy header (expected end of header, got \\x00)", format_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy(header_for("<f8", std::string(40, '(') + "6," + std::string(40, ')')), f8x6),
                                      "t.npy"),
                             "t.npy: bad .npy header (expected a shallower literal, got ()", format_error);
    }
    SUBCASE("keys") {
        CHECK_THROWS_WITH_AS(read_npy(make_npy("{'descr': '<f8', 'fortran_order': False}", f8x6), "t.npy"),
                             "t.npy: bad .npy header (expected keys descr, fortran_order and shape, "
                             "got descr, fortran_order)",
                             format_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (6,), 'x': 1}", f8x6),
                                      "t.npy"),
                             "t.npy: bad .npy header (expected keys descr, fortran_order and shape, "
                             "got descr, fortran_order, shape, x)",
                             format_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy("{'descr': '<f8', 'descr': '<f8', 'shape': (6,)}", f8x6), "t.npy"),
                             "t.npy: bad .npy header (expected keys descr, fortran_order and shape, "
                             "got descr, descr, shape)",
                             format_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy("{}", f8x6), "t.npy"),
                             "t.npy: bad .npy header (expected keys descr, fortran_order and shape, got no keys)",
                             format_error);
    }
    SUBCASE("values") {
        CHECK_THROWS_WITH_AS(read_npy(make_npy(header_for("<f8", "(6,)", "1"), f8x6), "t.npy"),
                             "t.npy: bad .npy header (expected fortran_order True or False, got 1)", format_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy(header_for("<f8", "[6]"), f8x6), "t.npy"),
                             "t.npy: bad .npy header (expected shape as a tuple of non-negative integers, got [6])",
                             format_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy(header_for("<f8", "(6)"), f8x6), "t.npy"),
                             "t.npy: bad .npy header (expected shape as a tuple of non-negative integers, got (6))",
                             format_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy(header_for("<f8", "(-6,)"), f8x6), "t.npy"),
                             "t.npy: bad .npy header (expected shape as a tuple of non-negative integers, got (-6,))",
                             format_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy(header_for("<f8", "(99999999999999999999,)"), f8x6), "t.npy"),
                             "t.npy: bad .npy header (expected shape as a tuple of non-negative integers, "
                             "got (99999999999999999999,))",
                             format_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy(header_for("<f8", "('6',)"), f8x6), "t.npy"),
                             "t.npy: bad .npy header (expected shape as a tuple of non-negative integers, got ('6',))",
                             format_error);
    }
    SUBCASE("unsupported dtypes and ranks are value errors") {
        for (const char* d : {"<c8", "|O", "<U3", "<f16", "<i3", "|V8", "<M8[ns]"}) {
            CAPTURE(d);
            CHECK_THROWS_WITH_AS(read_npy(make_npy(header_for(d, "(6,)"), f8x6), "t.npy"),
                                 ("t.npy: unsupported dtype (expected bool, int, uint or float, got " + std::string(d) +
                                  ")")
                                     .c_str(),
                                 value_error);
        }
        CHECK_THROWS_WITH_AS(read_npy(make_npy("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (6,)}", f8x6),
                                      "t.npy"),
                             "t.npy: unsupported dtype (expected bool, int, uint or float, got [('a', '<i4')])",
                             value_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy(header_for("<f8", "(1, 1, 1, 1, 2, 3)"), f8x6), "t.npy"),
                             "t.npy: unsupported rank (expected 0 to 5 dimensions, got 6)", value_error);
        // Rank 5 is (L, B, H, Tq, Tk), every layer's attention (attn rollout).
        CHECK(read_npy(make_npy(header_for("<f8", "(1, 1, 1, 2, 3)"), f8x6), "t.npy").shape == attn::shape_t{1, 1, 1, 2, 3});
    }
    SUBCASE("shape overflow") {
        CHECK_THROWS_WITH_AS(read_npy(make_npy(header_for("<f8", "(4611686018427387904, 4611686018427387904)"), f8x6),
                                      "t.npy"),
                             "t.npy: array too large (expected at most 2^64 - 1 bytes, got shape "
                             "(4611686018427387904, 4611686018427387904) of float64)",
                             format_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy(header_for("<f8", "(2305843009213693952,)"), f8x6), "t.npy"),
                             "t.npy: array too large (expected at most 2^64 - 1 bytes, got shape "
                             "(2305843009213693952,) of float64)",
                             format_error);
    }
    SUBCASE("data size") {
        CHECK_THROWS_WITH_AS(read_npy(make_npy(header_for("<f8", "(100000000,)"), bytes_of({1, 2})), "t.npy"),
                             "t.npy: truncated .npy data (expected 800000000 bytes, got 16)", format_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy(header_for("<f8", "(2, 3)"), f8x6.substr(0, 40)), "t.npy"),
                             "t.npy: truncated .npy data (expected 48 bytes, got 40)", format_error);
        CHECK_THROWS_WITH_AS(read_npy(make_npy(header_for("<f8", "(2, 3)"), f8x6 + "12345678"), "t.npy"),
                             "t.npy: extra bytes after .npy data (expected 48 bytes, got 56)", format_error);
    }
}

TEST_CASE("npy: every prefix of a valid file is rejected cleanly") {
    // A fuzz-style sweep: no prefix may crash, and each must throw an attn::error.
    const std::string full = io_test::slurp(io_test::fixture_path("npy/f8_be_F_2x3x4.npy"));
    for (std::size_t n = 0; n < full.size(); ++n) {
        CAPTURE(n);
        CHECK_THROWS_AS(read_npy(full.substr(0, n), "t.npy"), attn::error);
    }
}

TEST_CASE("npy: unicode arrays (an .npz's tokens and meta) are np.save's bytes, and NumPy's read back") {
    // tests/fixtures/io/unicode/: np.save of '<U' and '>U' arrays (scripts/make_io_fixtures.py).
    const std::string folder = std::string(ATTN_SOURCE_DIR) + "/tests/fixtures/io/unicode/";
    const nlohmann::json expected = nlohmann::json::parse(io_test::slurp(folder + "expected.json"));
    for (const auto& [name, want] : expected.items()) {
        CAPTURE(name);
        const std::string bytes = io_test::slurp(folder + name + ".npy");
        const attn::shape_t shape = want["shape"].get<attn::shape_t>();
        const std::vector<std::string> values = want["values"].get<std::vector<std::string>>();
        const attn::io::text_array got = attn::io::read_text_npy(bytes, name);
        CHECK(got.shape == shape);
        CHECK(got.values == values);
        if (name != "big_endian") CHECK(attn::io::text_npy(shape, values) == bytes);
    }
    CHECK_THROWS_WITH_AS(attn::io::read_text_npy(attn::io::text_npy({1}, {"a"}).replace(21, 3, "<f4"), "t.npy"),
                         "t.npy: not a unicode array (expected dtype <U…, got <f4)", attn::value_error);
    CHECK_THROWS_WITH_AS(attn::io::text_npy({3}, {"a"}), "labels: do not fill their array (expected 3, got 1)", attn::value_error);
}
