// write_csv (attn/io/csv.hpp): header, rank → (batch, head, row, col) mapping, numbers.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/csv.hpp"

using attn::array;
using attn::shape_t;
using attn::io::document;

namespace {

template <class T>
attn::io::named_array tensor(const std::string& name, shape_t shape, std::vector<T> values) {
    return {name, array::from<T>(std::move(shape), values.data())};
}

std::string csv_of(const document& doc, attn::io::text_style style = {}) {
    std::ostringstream s;
    attn::io::write_csv(s, doc, style);
    return s.str();
}

std::string csv_of(const attn::io::named_array& t, attn::io::text_style style = {}) {
    document doc;
    doc.tensors.push_back(t);
    return csv_of(doc, style);
}

const std::string header = "tensor,batch,head,row,col,value\n";

}  // namespace

TEST_CASE("write_csv: header only for no tensors") { CHECK(csv_of(document{}) == header); }

TEST_CASE("write_csv: index mapping by rank") {
    SUBCASE("0-d: all indices 0") { CHECK(csv_of(tensor<double>("s", {}, {2.5})) == header + "s,0,0,0,0,2.5\n"); }
    SUBCASE("1-d: (row), col 0") {
        CHECK(csv_of(tensor<float>("lse", {3}, {1, 2, 3})) ==
              header + "lse,0,0,0,0,1\nlse,0,0,1,0,2\nlse,0,0,2,0,3\n");
    }
    SUBCASE("2-d: (row, col), batch 0, head 0") {
        CHECK(csv_of(tensor<float>("weights", {2, 2}, {1, 0, 0.5f, 0.5f})) ==
              header +
                  "weights,0,0,0,0,1\n"
                  "weights,0,0,0,1,0\n"
                  "weights,0,0,1,0,0.5\n"
                  "weights,0,0,1,1,0.5\n");
    }
    SUBCASE("3-d: (batch, row, col), head 0") {
        CHECK(csv_of(tensor<float>("w", {2, 1, 2}, {1, 2, 3, 4})) ==
              header +
                  "w,0,0,0,0,1\n"
                  "w,0,0,0,1,2\n"
                  "w,1,0,0,0,3\n"
                  "w,1,0,0,1,4\n");
    }
    SUBCASE("4-d: (batch, head, row, col)") {
        CHECK(csv_of(tensor<double>("w", {2, 2, 2, 1}, {1, 2, 3, 4, 5, 6, 7, 8})) ==
              header +
                  "w,0,0,0,0,1\n"
                  "w,0,0,1,0,2\n"
                  "w,0,1,0,0,3\n"
                  "w,0,1,1,0,4\n"
                  "w,1,0,0,0,5\n"
                  "w,1,0,1,0,6\n"
                  "w,1,1,0,0,7\n"
                  "w,1,1,1,0,8\n");
    }
    SUBCASE("empty tensor: no lines") { CHECK(csv_of(tensor<float>("e", {2, 0}, {})) == header); }
}

TEST_CASE("write_csv: tensors follow each other in document order") {
    document doc;
    doc.tokens = {"ignored"};
    doc.tensors.push_back(tensor<float>("a", {1}, {7}));
    doc.tensors.push_back(tensor<float>("b", {1, 1}, {8}));
    CHECK(csv_of(doc) == header + "a,0,0,0,0,7\nb,0,0,0,0,8\n");
}

TEST_CASE("write_csv: numbers — shortest per dtype, precision, non-finite as nan/inf/-inf") {
    const float inf = std::numeric_limits<float>::infinity();
    CHECK(csv_of(tensor<float>("f", {4}, {0.1f, -inf, inf, std::nanf("")})) ==
          header + "f,0,0,0,0,0.1\nf,0,0,1,0,-inf\nf,0,0,2,0,inf\nf,0,0,3,0,nan\n");
    CHECK(csv_of(tensor<float>("f", {1}, {1.0f / 3.0f})) == header + "f,0,0,0,0,0.33333334\n");
    CHECK(csv_of(tensor<double>("d", {1}, {1.0 / 3.0})) == header + "d,0,0,0,0,0.3333333333333333\n");
    CHECK(csv_of(tensor<double>("d", {1}, {1.0 / 3.0}), {2, false}) == header + "d,0,0,0,0,0.33\n");
}

TEST_CASE("write_csv: names needing quotes are quoted (RFC 4180)") {
    CHECK(csv_of(tensor<float>("a,\"b\"", {}, {1})) == header + "\"a,\"\"b\"\"\",0,0,0,0,1\n");
}

TEST_CASE("write_csv: rank above 4 is a shape_error before anything is written") {
    document doc;
    doc.tensors.push_back(tensor<float>("ok", {1}, {1}));
    doc.tensors.push_back(tensor<float>("deep", {1, 1, 1, 1, 1}, {1}));
    std::ostringstream s;
    CHECK_THROWS_WITH_AS(attn::io::write_csv(s, doc, {}),
                         "deep: cannot write a tensor of rank 5 as CSV (expected rank 0 to 4, got (1, 1, 1, 1, 1))",
                         attn::shape_error);
    CHECK(s.str().empty());
}

TEST_CASE("write_csv: large 4-D tensor (parallel blocks) has every line in order") {
    const std::size_t B = 2, H = 3, R = 100, C = 150;
    std::vector<float> v(B * H * R * C);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) / 7.0f;
    const std::string text = csv_of(tensor<float>("w", {B, H, R, C}, v));

    std::istringstream in(text);
    std::string line;
    std::getline(in, line);
    REQUIRE(line + "\n" == header);
    std::size_t i = 0, bad = 0;
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t h = 0; h < H; ++h)
            for (std::size_t r = 0; r < R; ++r)
                for (std::size_t c = 0; c < C; ++c, ++i) {
                    if (!std::getline(in, line)) {
                        ++bad;
                        continue;
                    }
                    const std::string prefix = "w," + std::to_string(b) + "," + std::to_string(h) + "," +
                                               std::to_string(r) + "," + std::to_string(c) + ",";
                    const bool prefix_ok = line.compare(0, prefix.size(), prefix) == 0;
                    const float back = std::strtof(line.c_str() + prefix.size(), nullptr);
                    bad += !prefix_ok || back != v[i];
                }
    CHECK(bad == 0);
    CHECK(!std::getline(in, line));
}

TEST_CASE("write_csv: (H, Tq, Tk) stages of a rank-2 input with several heads fill the head column") {
    // docs/formats.md "Shapes of what is written": rank 2 with several heads gives (H, Tq, Tk);
    // meta says heads > 1 without average_heads.
    document doc;
    doc.meta = nlohmann::ordered_json::parse(R"({"heads": 2, "average_heads": false})");
    doc.tensors.push_back(tensor<float>("weights", {2, 1, 2}, {0.25f, 0.75f, 0.5f, 0.5f}));
    doc.tensors.push_back(tensor<float>("scores", {2, 1, 2}, {1, 2, 3, 4}));
    CHECK(csv_of(doc) ==
          header +
              "weights,0,0,0,0,0.25\n"
              "weights,0,0,0,1,0.75\n"
              "weights,0,1,0,0,0.5\n"
              "weights,0,1,0,1,0.5\n"
              "scores,0,0,0,0,1\n"
              "scores,0,0,0,1,2\n"
              "scores,0,1,0,0,3\n"
              "scores,0,1,0,1,4\n");

    const std::string as_batches =
        header +
        "weights,0,0,0,0,0.25\n"
        "weights,0,0,0,1,0.75\n"
        "weights,1,0,0,0,0.5\n"
        "weights,1,0,0,1,0.5\n";
    SUBCASE("averaged over heads, one head, or no meta: (B, Tq, Tk)") {
        for (const char* meta : {R"({"heads": 2, "average_heads": true})", R"({"heads": 1})", "null"}) {
            CAPTURE(meta);
            document b;
            b.meta = nlohmann::ordered_json::parse(meta);
            b.tensors.push_back(doc.tensors.front());
            CHECK(csv_of(b) == as_batches);
        }
    }
    SUBCASE("rank-3 stages that are not Tq×Tk ((B, T, E) output) stay batches") {
        document b;
        b.meta = doc.meta;
        b.tensors.push_back(tensor<float>("output", {2, 1, 2}, {0.25f, 0.75f, 0.5f, 0.5f}));
        CHECK(csv_of(b) ==
              header +
                  "output,0,0,0,0,0.25\n"
                  "output,0,0,0,1,0.75\n"
                  "output,1,0,0,0,0.5\n"
                  "output,1,0,0,1,0.5\n");
    }
}
