// Tests for include/attn/io/input.hpp: reading files and stdin, recognising content,
// the naming rule and FILE:NAME specs.

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/input.hpp"
#include "io_fixtures.hpp"

namespace fs = std::filesystem;
using attn::format_error;
using attn::io_error;
using attn::value_error;
using attn::io::load_array;
using attn::io::load_bundle;
using attn::io::read_file;

namespace {

/// A fresh directory for one test case, removed afterwards.
struct temp_dir {
    fs::path path;
    temp_dir() {
        path = fs::temp_directory_path() / ("attn_test_input_" + std::to_string(::getpid()) + "_" +
                                            std::to_string(counter()++));
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~temp_dir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    static int& counter() {
        static int n = 0;
        return n;
    }
    std::string write(const std::string& name, const std::string& content) const {
        const fs::path p = path / name;
        std::ofstream(p, std::ios::binary) << content;
        return p.string();
    }
};

/// Feeds `content` to std::cin for the lifetime of the object.
struct fake_stdin {
    std::istringstream in;
    std::streambuf* old;
    explicit fake_stdin(const std::string& content) : in(content), old(std::cin.rdbuf(in.rdbuf())) {}
    ~fake_stdin() {
        std::cin.rdbuf(old);
        std::cin.clear();
    }
};

std::vector<std::string> names(const attn::io::bundle& b) {
    std::vector<std::string> n;
    for (const auto& a : b.arrays) n.push_back(a.name);
    return n;
}

}  // namespace

TEST_CASE("input: read_file") {
    temp_dir dir;
    const std::string bin("a\0b\r\n\x93", 6);
    CHECK(read_file(dir.write("bin", bin)) == bin);
    CHECK(read_file(dir.write("empty", "")).empty());

    const std::string missing = (dir.path / "missing.npy").string();
    CHECK_THROWS_WITH_AS(read_file(missing), (missing + ": cannot open file (No such file or directory)").c_str(),
                         io_error);
    CHECK_THROWS_WITH_AS(read_file(dir.path.string()), (dir.path.string() + ": cannot read file (Is a directory)").c_str(),
                         io_error);

    fake_stdin in(bin);
    CHECK(read_file("-") == bin);
}

TEST_CASE("input: load_bundle recognises content, not names") {
    temp_dir dir;
    SUBCASE(".npy (whatever its name) is x") {
        const std::string npy = io_test::slurp(io_test::fixture_path("npy/f4_le_C_3x4.npy"));
        const auto b = load_bundle(dir.write("data.json", npy));
        CHECK(names(b) == std::vector<std::string>{"x"});
        CHECK(b.arrays[0].value.shape == attn::shape_t{3, 4});
    }
    SUBCASE(".npz names are lower-cased and kept in order") {
        const auto b = load_bundle(io_test::fixture_path("npz/savez_compressed.npz"));
        CHECK(names(b) == std::vector<std::string>{"q", "k", "attn_mask", "lengths"});
        REQUIRE(b.find("K") != nullptr);
        CHECK(b.find("K")->shape == attn::shape_t{3, 4});
    }
    SUBCASE("a lone array with a foreign name is x") {
        CHECK(names(load_bundle(io_test::fixture_path("npz/positional.npz"))) == std::vector<std::string>{"x"});
        CHECK(names(load_bundle(dir.write("a.json", R"({"data": [[1, 2]], "mask": "causal"})"))) ==
              std::vector<std::string>{"x"});
    }
    SUBCASE("a lone array with an attn name keeps it") {
        CHECK(names(load_bundle(dir.write("a.json", R"({"Key_Padding_Mask": [[true, false]]})"))) ==
              std::vector<std::string>{"key_padding_mask"});
    }
    SUBCASE("of several arrays, those attn does not use are set aside by name") {
        const auto b = load_bundle(dir.write("a.npy", R"({"q": [[1]], "extra": [[2]], "tokens": "a"})"));
        CHECK(names(b) == std::vector<std::string>{"q"});
        CHECK(b.ignored == std::vector<std::string>{"extra"});
        CHECK(b.tokens == std::vector<std::string>{"a"});
    }
    SUBCASE("nn.MultiheadAttention's state_dict names are attn's") {
        const auto b = load_bundle(dir.write("sd.json", R"({"x": [[1, 2]], "in_proj_weight": [[1, 0], [0, 1],
            [1, 0], [0, 1], [1, 0], [0, 1]], "out_proj.weight": [[1, 0], [0, 1]], "Out_Proj.Bias": [0, 0]})"));
        CHECK(names(b) == std::vector<std::string>{"x", "in_proj_weight", "w_o", "b_o"});
        CHECK(b.ignored.empty());
    }
    SUBCASE("two arrays of one name, ignoring case or through a state_dict name, are refused") {
        CHECK_THROWS_WITH_AS(load_bundle(dir.write("d.json", R"({"w_o": [[1]], "out_proj.weight": [[2]]})")),
                             ((dir.path / "d.json").string() + ": duplicate array name (expected each name once, ignoring case, got "
                                         "'w_o' twice (as out_proj.weight))").c_str(),
                             attn::format_error);
    }
    SUBCASE("stdin") {
        fake_stdin in("[[1, 2], [3, 4]]");
        const auto b = load_bundle("-");
        CHECK(names(b) == std::vector<std::string>{"x"});
        CHECK(b.arrays[0].value.shape == attn::shape_t{2, 2});
    }
    SUBCASE("errors name the file") {
        const std::string empty = dir.write("empty", "");
        CHECK_THROWS_WITH_AS(load_bundle(empty), (empty + ": empty input (expected .npy, .npz, .safetensors or JSON, got 0 bytes)").c_str(),
                             format_error);
        const std::string blank = dir.write("blank", " \n");
        CHECK_THROWS_WITH_AS(load_bundle(blank),
                             (blank + ": empty input (expected .npy, .npz, .safetensors or JSON, got only whitespace)").c_str(),
                             format_error);
        const std::string bad = dir.write("bad.json", "{\"q\": [1,]}");
        CHECK_THROWS_WITH_AS(load_bundle(bad), (bad + ": invalid JSON at line 1, column 10 (unexpected ']'; "
                                                      "expected '[', '{', or a literal)")
                                                   .c_str(),
                             format_error);
        fake_stdin in(std::string("\x93NUMPY\x01\x00", 8));
        CHECK_THROWS_WITH_AS(load_bundle("-"), "<stdin>: truncated .npy header (expected 10 bytes, got 8)", format_error);
    }
}

TEST_CASE("input: check_json_start refuses what cannot be JSON, passes what starts like it") {
    using attn::io::check_json_start;
    SUBCASE("every byte a JSON value can begin with, after whitespace or a UTF-8 BOM") {
        for (const std::string text : {"{", "[", "\"", "-", "0", "5", "9", "true", "false", "null", " \t\r\n[1]",
                                       "\xef\xbb\xbf{}", "\xef\xbb\xbf \n[", "\xef\xbb\xbf"}) {
            CAPTURE(text);
            CHECK_NOTHROW(check_json_start(text, "in"));
        }
    }
    SUBCASE("broken JSON passes: read_json reports where") {
        CHECK_NOTHROW(check_json_start("{\"q\": [1,", "in"));
        CHECK_NOTHROW(check_json_start("nope", "in"));
    }
    SUBCASE("CSV text and PyTorch pickles are named") {
        CHECK_THROWS_WITH_AS(check_json_start("1,2,3\n4,5,6\n", "in"),
                             "in: not a .npy, .npz, .safetensors or JSON file: CSV text (read it with numpy.loadtxt, save it with "
                             "numpy.save)",
                             attn::format_error);
        CHECK_THROWS_WITH_AS(check_json_start(std::string("\x80\x02\x8a\x0a", 4), "in"),
                             "in: not a .npy, .npz, .safetensors or JSON file: a PyTorch archive (save tensors with numpy.save or safetensors.torch.save_file)",
                             attn::format_error);
    }
    SUBCASE("UTF-8 text in the first 16 bytes, a sequence cut at byte 16, and anything after it") {
        CHECK_NOTHROW(check_json_start("{\"tokens\": \"caf\xc3\xa9\"}", "in"));
        CHECK_NOTHROW(check_json_start("[\"\xf0\x9f\x98\x80\xe2\x82\xac\"]", "in"));
        CHECK_NOTHROW(check_json_start("{\"tokens\": \"caf\xe2\x82\xac\"}", "in"));  // € spans bytes 15-17
        CHECK_NOTHROW(check_json_start("{\"tokens\": \"caf\xe9 (Latin-1)\"}", "in"));   // é at byte 15
        CHECK_NOTHROW(check_json_start("{\"tokens\": \"a b c\xe9\"}", "in"));            // é at byte 17
    }
    SUBCASE("empty or blank") {
        CHECK_THROWS_WITH_AS(check_json_start("", "in"), "in: empty input (expected .npy, .npz, .safetensors or JSON, got 0 bytes)",
                             format_error);
        CHECK_THROWS_WITH_AS(check_json_start(" \r\n\t", "in"),
                             "in: empty input (expected .npy, .npz, .safetensors or JSON, got only whitespace)", format_error);
    }
    SUBCASE("a first byte no JSON value begins with, or bytes that are not UTF-8 text") {
        struct bad_case {
            std::string bytes;
            const char* shown;
        };
        const bad_case cases[] = {
            {std::string("\x89PNG\r\n\x1a\n", 8), "89 50 4e 47"},
            {std::string("\x1f\x8b\x08\x00", 4), "1f 8b 08 00"},                // gzip
            {"%PDF-1.7", "25 50 44 46"},
            {"\xff\xfe[\0", "ff fe 5b"},                                       // UTF-16 with its BOM
            {"\xef\xbb[]", "ef bb 5b 5d"},                                     // a broken BOM
            {"  # comment", "20 20 23 20"},
            {"x", "78"},
            {std::string("1\0\0\0", 4), "31 00 00 00"},                         // control bytes
            {"[1, 2,\x01 3]", "5b 31 2c 20"},
            {"[\"\xc0\xaf\"]", "5b 22 c0 af"},                                 // overlong '/'
            {"[\"\xed\xa0\x80\"]", "5b 22 ed a0"},                             // a surrogate
            {"[\"\xf4\x90\x80\x80\"]", "5b 22 f4 90"},                         // beyond U+10FFFF
            {"[\"\x80\"]", "5b 22 80 22"},                                     // a lone continuation byte
            {"[\"\xc3(\"]", "5b 22 c3 28"},                                    // a cut sequence
        };
        for (const auto& c : cases) {
            CAPTURE(c.shown);
            CHECK_THROWS_WITH_AS(check_json_start(c.bytes, "f.bin"),
                                 (std::string("f.bin: not a .npy, .npz, .safetensors or JSON file (starts with bytes ") + c.shown + ")")
                                     .c_str(),
                                 format_error);
        }
    }
}

TEST_CASE("input: load_array") {
    temp_dir dir;
    const std::string npz = io_test::fixture_path("npz/savez.npz");
    SUBCASE("FILE:NAME, case-insensitive") {
        CHECK(load_array(npz + ":q").shape == attn::shape_t{2, 3, 4});
        CHECK(load_array(npz + ":ATTN_MASK").type == attn::dtype::b1);
        CHECK(load_array(npz + ":k").shape == attn::shape_t{3, 4});
    }
    SUBCASE("a lone array: FILE, FILE:x or FILE:<stored name>") {
        const std::string pos = io_test::fixture_path("npz/positional.npz");
        CHECK(load_array(pos).shape == attn::shape_t{3, 4});
        CHECK(load_array(pos + ":x").type == attn::dtype::i4);
        CHECK(load_array(pos + ":arr_0").type == attn::dtype::i4);
        const std::string npy = io_test::fixture_path("npy/i2_be_C_7.npy");
        CHECK(load_array(npy).shape == attn::shape_t{7});
        CHECK(load_array(npy + ":x").shape == attn::shape_t{7});
    }
    SUBCASE("a path that exists as written is not split") {
        const std::string odd = dir.write("w:q", "[[1, 2]]");
        CHECK(load_array(odd).shape == attn::shape_t{1, 2});
    }
    SUBCASE("errors") {
        CHECK_THROWS_WITH_AS(load_array(npz + ":w_q"),
                             (npz + ":w_q: no array named 'w_q' (expected one of: q, k, attn_mask, lengths)").c_str(),
                             value_error);
        CHECK_THROWS_WITH_AS(load_array(npz),
                             (npz + ": file holds 4 arrays (expected one array or FILE:NAME, got q, k, attn_mask, lengths)")
                                 .c_str(),
                             value_error);
        const std::string only_tokens = dir.write("t.json", R"({"tokens": "a b"})");
        CHECK_THROWS_WITH_AS(load_array(only_tokens), (only_tokens + ": file holds no arrays (expected one array, got none)").c_str(),
                             value_error);
        CHECK_THROWS_WITH_AS(load_array(only_tokens + ":q"),
                             (only_tokens + ":q: no array named 'q' (file holds no arrays)").c_str(), value_error);
        const std::string missing = (dir.path / "nope.npz").string();
        CHECK_THROWS_WITH_AS(load_array(missing + ":q"), (missing + ": cannot open file (No such file or directory)").c_str(),
                             io_error);
        CHECK_THROWS_WITH_AS(load_array(missing), (missing + ": cannot open file (No such file or directory)").c_str(),
                             io_error);
    }
}

TEST_CASE("the input table: one row per name, each a name the bundle reader knows, checkpoints take masks and positions") {
    std::set<std::string> names;
    std::vector<std::string> with_checkpoint;
    for (const attn::io::input_kind& k : attn::io::input_kinds()) {
        CHECK(names.insert(k.name).second);
        CHECK(attn::io::is_attn_name(k.name));
        if (k.with_checkpoint) with_checkpoint.push_back(k.name);
    }
    // docs/design.md §4.3: a checkpoint run takes its ids or x, the masks, position_ids and
    // the mask-like inputs; its weights come from the checkpoint.
    CHECK(with_checkpoint == std::vector<std::string>{"x", "attn_mask", "key_padding_mask", "attention_mask", "token_ids",
                                                      "alibi_slopes", "document_ids", "sinks", "position_ids", "lengths"});
    CHECK_FALSE(attn::io::is_attn_name("arr_0"));
}
