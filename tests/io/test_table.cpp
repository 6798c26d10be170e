// write_table (attn/io/table.hpp): alignment, labels, precision, colour, masked cells,
// elision of large tensors, head labels, control characters.

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "attn/io/table.hpp"

using attn::array;
using attn::shape_t;
using attn::io::document;

namespace {

template <class T>
attn::io::named_array tensor(const std::string& name, shape_t shape, std::vector<T> values) {
    return {name, array::from<T>(std::move(shape), values.data())};
}

std::string table_of(const document& doc, bool color = false, int precision = 0) {
    std::ostringstream s;
    attn::io::write_table(s, doc, {precision, false}, color);
    return s.str();
}

std::string table_of(const document& doc, const attn::io::table_options& options) {
    std::ostringstream s;
    attn::io::write_table(s, doc, {}, options);
    return s.str();
}

/// A masked weight: U+00B7 MIDDLE DOT in UTF-8.
const std::string dot = "\xC2\xB7";

/// Removes ANSI SGR sequences (ESC [ digits/semicolons m).
std::string strip_ansi(const std::string& s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\x1b' && i + 1 < s.size() && s[i + 1] == '[') {
            i += 2;
            while (i < s.size() && s[i] != 'm') ++i;
            continue;
        }
        out += s[i];
    }
    return out;
}

document weights_doc() {
    document doc;
    doc.tokens = {"my", "name"};
    doc.tensors.push_back(tensor<float>("weights", {2, 2}, {1, 0, 0.5f, 0.5f}));
    return doc;
}

const double inf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("write_table: 2-D with token labels on rows and columns") {
    // No scores in the document: the weight that is exactly 0 counts as masked (as attn plot).
    CHECK(table_of(weights_doc()) ==
          "weights (2, 2)\n"
          "       my  name\n"
          "my      1     \xC2\xB7\n"
          "name  0.5   0.5\n");
}

TEST_CASE("write_table: 4-D blocks, index labels, default precision 4, non-finite") {
    document doc;
    doc.tokens = {"only", "three", "tokens"};  // matches neither rows nor columns
    doc.tensors.push_back(tensor<double>("scores", {1, 2, 2, 2},
                                         {1.0 / 3.0, -inf, 0.5, 0.25, 2, 1e-5, std::nan(""), 100000}));
    const std::string expected =
        "scores (1, 2, 2, 2)\n"
        "batch 0, head 0\n"
        "        0      1\n"
        "0  0.3333   -inf\n"
        "1     0.5   0.25\n"
        "\n"
        "batch 0, head 1\n"
        "        0      1\n"
        "0       2  1e-05\n"
        "1     nan  1e+05\n";
    CHECK(table_of(doc) == expected);
    CHECK(table_of(doc, true) == expected);  // only "weights" is shaded
}

TEST_CASE("write_table: 3-D blocks are labelled by batch, precision option") {
    document doc;
    doc.tensors.push_back(tensor<float>("output", {2, 1, 2}, {1.0f / 3.0f, 2, -0.5f, 10}));
    CHECK(table_of(doc, false, 2) ==
          "output (2, 1, 2)\n"
          "batch 0\n"
          "      0   1\n"
          "0  0.33   2\n"
          "\n"
          "batch 1\n"
          "      0   1\n"
          "0  -0.5  10\n");
}

TEST_CASE("write_table: 1-D is one row, 0-D one number, tensors separated by a blank line") {
    document doc;
    doc.tokens = {"a", "b", "c"};
    doc.tensors.push_back(tensor<float>("lse", {3}, {1, 2, 30}));
    doc.tensors.push_back(tensor<double>("s", {}, {2.5}));
    doc.tensors.push_back(tensor<double>("e", {0, 2}, {}));
    CHECK(table_of(doc) ==
          "lse (3,)\n"
          "  a  b   c\n"
          "  1  2  30\n"
          "\n"
          "s ()\n"
          "2.5\n"
          "\n"
          "e (0, 2)\n"
          "(empty)\n");
}

TEST_CASE("write_table: colour shades weights white to blue and keeps the alignment") {
    document doc = weights_doc();
    // Finite scores: the 0 weight is a true 0 (exp underflow), shaded white.
    doc.tensors.insert(doc.tensors.begin(), tensor<double>("scores", {2, 2}, {0, -800, 0, 0}));
    const std::string plain = table_of(doc, false);
    const std::string colored = table_of(doc, true);
    CHECK(plain.find('\x1b') == std::string::npos);
    CHECK(colored.find("\x1b[48;2;255;255;255m") != std::string::npos);  // 0 → white
    CHECK(colored.find("\x1b[48;2;8;48;107m") != std::string::npos);     // 1 → blue
    CHECK(colored.find("\x1b[0m") != std::string::npos);
    CHECK(strip_ansi(colored) == plain);
}

TEST_CASE("write_table: control characters in tokens cannot emit escape codes") {
    document doc;
    doc.tokens = {"\x1b[31m", "b"};
    doc.tensors.push_back(tensor<float>("weights", {2, 2}, {1, 0, 0, 1}));
    const std::string text = table_of(doc, false);
    CHECK(text.find('\x1b') == std::string::npos);
    CHECK(text.find("\\x1B[31m") != std::string::npos);
}

// Expected texts below are laid out by hand from the rules of table.hpp: a label column
// as wide as its widest label, then per column two spaces and the column right-aligned
// to its widest header or cell.

TEST_CASE("write_table: masked weights print as a middle dot, a true 0 as 0 (masks judged from scores)") {
    document doc;
    doc.tokens = {"a", "b"};
    doc.meta = nlohmann::ordered_json::parse(R"({"mask_fill": "-Infinity", "heads": 1})");
    // (0, 1) is masked (score −∞); (1, 0) is a true 0: its score is finite, exp underflows.
    doc.tensors.push_back(tensor<double>("scores", {2, 2}, {0.5, -inf, -800, 0}));
    doc.tensors.push_back(tensor<double>("weights", {2, 2}, {1, 0, 0, 1}));
    CHECK(table_of(doc) ==
          "scores (2, 2)\n"
          "      a     b\n"
          "a   0.5  -inf\n"
          "b  -800     0\n"
          "\n"
          "weights (2, 2)\n"
          "   a  b\n"
          "a  1  " + dot + "\n"
          "b  0  1\n");
}

TEST_CASE("write_table: a finite --mask-fill in meta marks the cells whose score equals it") {
    document doc;
    doc.meta = nlohmann::ordered_json::parse(R"({"mask_fill": -1e9})");
    // Row 1 is fully masked with a finite fill: its weights are uniform, not masked zeros.
    doc.tensors.push_back(tensor<double>("scores", {2, 2}, {0, -1e9, -1e9, -1e9}));
    doc.tensors.push_back(tensor<double>("weights", {2, 2}, {1, 0, 0.5, 0.5}));
    CHECK(table_of(doc) ==
          "scores (2, 2)\n"
          "        0       1\n"
          "0       0  -1e+09\n"
          "1  -1e+09  -1e+09\n"
          "\n"
          "weights (2, 2)\n"
          "     0    1\n"
          "0    1    " + dot + "\n"
          "1  0.5  0.5\n");
}

TEST_CASE("write_table: masked weights that are NaN (--masked-rows nan) stay nan, other stages keep their zeros") {
    document doc;
    doc.tensors.push_back(tensor<double>("scores", {2, 2}, {0, -inf, -inf, -inf}));
    doc.tensors.push_back(tensor<double>("weights", {2, 2}, {1, 0, std::nan(""), std::nan("")}));
    doc.tensors.push_back(tensor<double>("output", {2, 2}, {0, 1, 0, 0}));
    CHECK(table_of(doc) ==
          "scores (2, 2)\n"
          "      0     1\n"
          "0     0  -inf\n"
          "1  -inf  -inf\n"
          "\n"
          "weights (2, 2)\n"
          "     0    1\n"
          "0    1    " + dot + "\n"
          "1  nan  nan\n"
          "\n"
          "output (2, 2)\n"
          "   0  1\n"
          "0  0  1\n"
          "1  0  0\n");
}

TEST_CASE("write_table: masked cells are not shaded") {
    const std::string colored = table_of(weights_doc(), true);
    CHECK(colored.find("\x1b[48;2;255;255;255m") == std::string::npos);  // no white: the 0 is masked
    CHECK(colored.find("\x1b[0m     " + dot + "\n") != std::string::npos);
    CHECK(strip_ansi(colored) == table_of(weights_doc(), false));
}

TEST_CASE("write_table: above the threshold, first and last 3 rows and columns with ... as NumPy") {
    // NumPy (set_printoptions): more than `threshold` elements → summarise; then every
    // axis longer than 2·edgeitems shows its first and last edgeitems (default 3).
    std::vector<double> v(100);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
    document doc;
    doc.tensors.push_back(tensor<double>("m", {10, 10}, v));
    attn::io::table_options small;
    small.threshold = 50;
    CHECK(table_of(doc, small) ==
          "m (10, 10)\n"
          "      0   1   2  ...   7   8   9\n"
          "0     0   1   2  ...   7   8   9\n"
          "1    10  11  12  ...  17  18  19\n"
          "2    20  21  22  ...  27  28  29\n"
          "...\n"
          "7    70  71  72  ...  77  78  79\n"
          "8    80  81  82  ...  87  88  89\n"
          "9    90  91  92  ...  97  98  99\n");

    // Exactly at the threshold: nothing elided.
    small.threshold = 100;
    CHECK(table_of(doc, small).find("...") == std::string::npos);

    // --full: every row and column, whatever the threshold.
    attn::io::table_options full = small;
    full.threshold = 50;
    full.full = true;
    std::string expected = "m (10, 10)\n ";
    for (int c = 0; c < 10; ++c) expected += "   " + std::to_string(c);
    expected += "\n";
    for (int r = 0; r < 10; ++r) {
        expected += std::to_string(r);
        for (int c = 0; c < 10; ++c) {
            const std::string n = std::to_string(10 * r + c);
            expected += std::string(4 - n.size(), ' ') + n;
        }
        expected += "\n";
    }
    CHECK(table_of(doc, full) == expected);
}

TEST_CASE("write_table: the default threshold is NumPy's, 1000 elements") {
    std::vector<double> v(1001);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
    document doc;
    doc.tensors.push_back(tensor<double>("r", {1, 1001}, v));
    // The single row is never elided (1 ≤ 6); widths are those of the cells shown.
    CHECK(table_of(doc) ==
          "r (1, 1001)\n"
          "   0  1  2  ...  998  999  1000\n"
          "0  0  1  2  ...  998  999  1000\n");
    v.pop_back();
    document exact;
    exact.tensors.push_back(tensor<double>("r", {1, 1000}, v));
    CHECK(table_of(exact).find("...") == std::string::npos);
}

TEST_CASE("write_table: leading axes are elided too, one ... block per hidden stretch") {
    document doc;
    doc.tensors.push_back(tensor<double>("t", {8, 1, 1}, {0, 1, 2, 3, 4, 5, 6, 7}));
    attn::io::table_options o;
    o.threshold = 4;
    std::string expected = "t (8, 1, 1)\n";
    for (int b : {0, 1, 2, -1, 5, 6, 7}) {
        if (b != 0) expected += "\n";
        if (b < 0) {
            expected += "...\n";
            continue;
        }
        expected += "batch " + std::to_string(b) + "\n   0\n0  " + std::to_string(b) + "\n";
    }
    CHECK(table_of(doc, o) == expected);
}

TEST_CASE("write_table: (H, Tq, Tk) stages of a rank-2 input with several heads are titled by head") {
    const auto weights = tensor<float>("weights", {2, 1, 2}, {0.25f, 0.75f, 0.5f, 0.5f});
    document doc;
    doc.meta = nlohmann::ordered_json::parse(R"({"heads": 2, "average_heads": false})");
    doc.tensors.push_back(weights);
    CHECK(table_of(doc) ==
          "weights (2, 1, 2)\n"
          "head 0\n"
          "      0     1\n"
          "0  0.25  0.75\n"
          "\n"
          "head 1\n"
          "      0     1\n"
          "0   0.5   0.5\n");

    SUBCASE("averaged over heads, or one head, or no meta: the first axis is the batch") {
        for (const char* meta : {R"({"heads": 2, "average_heads": true})", R"({"heads": 1})", "null"}) {
            CAPTURE(meta);
            document b;
            b.meta = nlohmann::ordered_json::parse(meta);
            b.tensors.push_back(weights);
            const std::string text = table_of(b);
            CHECK(text.find("batch 0\n") != std::string::npos);
            CHECK(text.find("batch 1\n") != std::string::npos);
            CHECK(text.find("head") == std::string::npos);
        }
    }
    SUBCASE("rank-3 stages that are not Tq×Tk (output (B, T, E)) stay batches") {
        document b;
        b.meta = nlohmann::ordered_json::parse(R"({"heads": 2, "average_heads": false})");
        b.tensors.push_back(tensor<float>("output", {2, 1, 2}, {0.25f, 0.75f, 0.5f, 0.5f}));
        CHECK(table_of(b).find("batch 1\n") != std::string::npos);
    }
}

TEST_CASE("write_table: C1 control characters in tokens are escaped as C0 ones are") {
    document doc;
    // U+0085 (NEL, C2 85) and U+009B (CSI, C2 9B, ESC [ on some terminals).
    doc.tokens = {"a\xC2\x85" "b", "\xC2\x9B" "31m"};
    doc.tensors.push_back(tensor<float>("weights", {2, 2}, {0.5f, 0.5f, 0.5f, 0.5f}));
    const std::string text = table_of(doc);
    CHECK(text ==
          "weights (2, 2)\n"
          "         a\\x85b  \\x9B31m\n"
          "a\\x85b      0.5      0.5\n"
          "\\x9B31m     0.5      0.5\n");
    CHECK(text.find('\xC2') == std::string::npos);

    SUBCASE("other two-byte characters, and a lone lead byte, are left as they are") {
        document d;
        d.tokens = {"\xC2\xA0" "x", "\xC3\xA9", "\xC2"};  // NBSP x, é, a truncated sequence
        d.tensors.push_back(tensor<float>("w", {3}, {1, 2, 3}));
        CHECK(table_of(d) ==
              "w (3,)\n"
              "  \xC2\xA0" "x  \xC3\xA9  \xC2\n"
              "   1  2  3\n");
    }
}
