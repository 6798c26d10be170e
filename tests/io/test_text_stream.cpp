// Streamed CSV and JSON of several layers (include/attn/io/text_stream.hpp, docs/design.md
// §5.4): layer by layer, byte for byte what write_csv and write_json give for the stacked
// document, for every dtype and rank a layer may have, empty tensors and dotted groups.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/csv.hpp"
#include "attn/io/json.hpp"
#include "attn/io/text_stream.hpp"
#include "npz_members.hpp"
#include "scratch_dir.hpp"

namespace {

/// A stacked tensor of `shape` (leading layer axis) whose values differ everywhere.
attn::array values(attn::dtype type, attn::shape_t shape, double seed) {
    attn::array a;
    a.type = type;
    a.shape = std::move(shape);
    const std::size_t n = attn::element_count(a.shape);
    a.data.resize(n * attn::dtype_size(type));
    for (std::size_t i = 0; i < n; ++i) {
        const double v = seed + 0.37 * static_cast<double>(i) - 1.0 / (1.0 + static_cast<double>(i));
        std::byte* p = a.data.data() + i * attn::dtype_size(type);
        if (type == attn::dtype::f4) {
            const float f = static_cast<float>(v);
            std::memcpy(p, &f, sizeof f);
        } else if (type == attn::dtype::f8) {
            std::memcpy(p, &v, sizeof v);
        } else if (type == attn::dtype::i8) {
            const auto k = static_cast<std::int64_t>(i * 7 % 5);
            std::memcpy(p, &k, sizeof k);
        } else if (type == attn::dtype::f2) {
            const std::uint16_t h = attn::float_to_half(v);
            std::memcpy(p, &h, sizeof h);
        } else {
            *p = static_cast<std::byte>(i % 3 == 0);
        }
    }
    return a;
}

std::size_t files_in(const std::string& dir) {
    return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator{}));
}

attn::io::document stacked_doc() {
    using attn::dtype;
    attn::io::document d;
    d.meta = {{"heads", 2}, {"average_heads", false}, {"model", {{"layer", "all"}, {"layers", 3}}}};
    d.tokens = {"a", "b"};
    d.tensors = {{"x", values(dtype::f4, {3, 2, 4}, 1)},
                 {"stats.entropy", values(dtype::f8, {3, 2, 2}, 2)},
                 {"weights", values(dtype::f4, {3, 1, 2, 2, 2}, 3)},
                 {"stats.argmax", values(dtype::i8, {3, 2, 2}, 4)},
                 {"mask", values(dtype::b1, {3, 2, 2}, 0)},
                 {"scores", values(dtype::f2, {3, 2, 2, 2}, 5)},
                 {"head_stats.entropy", values(dtype::f8, {3, 2}, 6)},
                 {"empty", values(dtype::f4, {3, 0, 4}, 7)},
                 {"scalar", values(dtype::f8, {3}, 8)}};
    return d;
}

/// Layer l of `d` as each_layer hands it: its slices, and meta naming the one layer.
attn::io::document layer_of(const attn::io::document& d, std::size_t l) {
    attn::io::document one;
    one.meta = d.meta;
    one.meta["model"]["layer"] = l;
    one.tokens = d.tokens;
    for (const auto& t : d.tensors) one.tensors.push_back({t.name, attn_test::leading_slice(t.value, l)});
    return one;
}

}  // namespace

TEST_CASE("json_stream and csv_stream: write_json's and write_csv's bytes for the stacked document") {
    attn_test::scratch_dir dir;
    const attn::io::document all = stacked_doc();
    for (const bool compact : {false, true})
        for (const int precision : {0, 3}) {
            CAPTURE(compact);
            CAPTURE(precision);
            attn::io::text_style style;
            style.compact = compact;
            style.precision = precision;
            std::ostringstream held, streamed;
            attn::io::write_json(held, all, style);
            attn::io::json_stream js(streamed, dir.path + "/out.json", 3, style);
            for (std::size_t l = 0; l < 3; ++l) js.append(layer_of(all, l));
            attn::io::document run = all;
            run.tensors.clear();
            js.finish(run);
            CHECK(streamed.str() == held.str());
        }
    std::ostringstream held_csv, streamed_csv;
    attn::io::document csv_all = all;
    csv_all.tensors.pop_back();  // CSV: no 0-d layer
    attn::io::write_csv(held_csv, csv_all, {});
    attn::io::csv_stream cs(streamed_csv, dir.path + "/out.csv", 3, {});
    for (std::size_t l = 0; l < 3; ++l) cs.append(layer_of(csv_all, l), l);
    cs.finish();
    CHECK(streamed_csv.str() == held_csv.str());
    CHECK(files_in(dir.path) == 0);  // the spools had no names
}

TEST_CASE("json_stream and csv_stream refuse a layer that does not continue the first, and a run cut short") {
    attn_test::scratch_dir dir;
    const attn::io::document all = stacked_doc();
    std::ostringstream out;
    attn::io::json_stream js(out, dir.path + "/out.json", 2, {});
    js.append(layer_of(all, 0));
    attn::io::document other = layer_of(all, 1);
    other.tensors.resize(1);
    CHECK_THROWS_AS(js.append(other), attn::shape_error);
    CHECK_THROWS_WITH_AS(js.finish(all), "x: streamed in part (expected 2 layers, got 1)", attn::shape_error);
    attn::io::csv_stream cs(out, dir.path + "/out.csv", 1, {});
    cs.append(layer_of(all, 0), 0);
    CHECK_THROWS_AS(cs.append(layer_of(all, 1), 1), attn::shape_error);
    attn::io::csv_stream rank5(out, dir.path + "/out.csv", 3, {});
    attn::io::document deep;
    deep.tensors = {{"deep", values(attn::dtype::f4, {1, 1, 1, 1, 2}, 0)}};
    CHECK_THROWS_WITH_AS(rank5.append(deep, 0),
                         "deep: cannot write a tensor of rank 6 as CSV (expected rank 1 to 5 with a layer axis, got (3, 1, 1, 1, 1, 2))",
                         attn::shape_error);
}
