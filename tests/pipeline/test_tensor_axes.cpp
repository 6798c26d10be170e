// Tensors carry their axes (docs/design.md §3.1 item 2): the pipeline names each stage's
// axes from the stage table once the input's layout has dropped B or H, the writers read
// them (io::tensor_axes) instead of inferring them from rank and meta, and a document
// read back from a file gets them from its meta by the same rule.

#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "attn/core/rope.hpp"
#include "attn/error.hpp"
#include "attn/io/csv.hpp"
#include "attn/io/plot.hpp"
#include "attn/io/table.hpp"
#include "attn/io/writers.hpp"
#include "attn/pipeline.hpp"
#include "attn/stages.hpp"

using attn::array;
using attn::shape_t;
using attn::io::document;
using attn::io::named_array;
using axes_t = std::vector<std::string>;

namespace {

named_array tensor(const std::string& name, shape_t shape, axes_t axes = {}) {
    std::vector<float> values(attn::element_count(shape));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i + 1) / 8;
    return {name, array::from<float>(std::move(shape), values.data()), std::move(axes)};
}

std::string csv_of(const document& doc) {
    std::ostringstream s;
    attn::io::write_csv(s, doc, {});
    return s.str();
}

std::string table_of(const document& doc) {
    std::ostringstream s;
    attn::io::write_table(s, doc, {}, false);
    return s.str();
}

/// The lines of `text` that start with `prefix`.
std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(prefix, 0) == 0) out.push_back(line);
    return out;
}

/// `t` without the axes it carries: what a document read back from a file holds.
named_array bare(const named_array& t) { return {t.name, t.value}; }

/// Every tensor's carried axes equal the ones the meta gives the same tensor read back:
/// the writers' output cannot depend on which of the two they read.
void check_carried_match_meta(const document& doc) {
    for (const named_array& t : doc.tensors) {
        INFO(t.name << " " << attn::shape_string(t.value.shape));
        CHECK(t.axes.size() == t.value.rank());
        // x given as (B, H, T, D) or (B, T, H, D) is no stage-table shape: the pipeline names
        // it, the meta leaves it unnamed.
        if (t.name == "x" && t.value.rank() == 4) continue;
        CHECK(attn::io::tensor_axes(doc, t) == t.axes);
        CHECK(attn::io::tensor_axes(doc, bare(t)) == t.axes);
    }
}

std::vector<named_array> random_inputs(shape_t x_shape) {
    std::mt19937 gen(7);
    std::normal_distribution<float> n;
    std::vector<float> values(attn::element_count(x_shape));
    for (float& v : values) v = n(gen);
    return {{"x", array::from<float>(std::move(x_shape), values.data())}};
}

}  // namespace

TEST_CASE("stage axes: the table's, less what the input's layout drops") {
    using attn::fit_axes;
    CHECK(attn::full_axes("weights") == axes_t{"B", "H", "Tq", "Tk"});
    CHECK(attn::full_axes("k_proj") == axes_t{"B", "Tk", "Hkv·D"});
    CHECK(attn::full_axes("stats.entropy") == axes_t{"B", "H", "Tq"});
    CHECK(attn::full_axes("stats.dk").empty());
    CHECK(attn::full_axes("head_stats.sink_mass") == axes_t{"B", "H"});
    CHECK(attn::full_axes("w_q").empty());
    CHECK(fit_axes("weights", 4, false) == axes_t{"B", "H", "Tq", "Tk"});
    CHECK(fit_axes("weights", 3, true) == axes_t{"H", "Tq", "Tk"});   // unbatched, several heads
    CHECK(fit_axes("weights", 3, false) == axes_t{"B", "Tq", "Tk"});  // one head, or averaged
    CHECK(fit_axes("scores", 2, true) == axes_t{"Tq", "Tk"});
    CHECK(fit_axes("lse", 2, true) == axes_t{"H", "Tq"});
    CHECK(fit_axes("stats.row_sum", 2, false) == axes_t{"B", "Tq"});
    CHECK(fit_axes("q", 3, true) == axes_t{"B", "Tq", "H·D"});
    CHECK(fit_axes("k", 2, true) == axes_t{"Tk", "Hkv·D"});
    CHECK(fit_axes("x", 2, false) == axes_t{"T", "E"});
    CHECK(fit_axes("k_proj", 4, true) == axes_t{"B", "Hkv", "Tk", "D"});
    CHECK(fit_axes("head_stats.entropy", 1, true) == axes_t{"H"});
    CHECK(fit_axes("rollout", 2, false) == axes_t{"Tq", "Tk"});
    CHECK(fit_axes("word_weights", 3, true) == axes_t{"H", "Wq", "Wk"});
    CHECK(fit_axes("x", 4, false).empty());  // no axis is guessed
    CHECK(fit_axes("weights", 5, false).empty());
    CHECK(fit_axes("w_q", 2, false).empty());
}

TEST_CASE("tensor axes: the writers follow the axes a tensor carries, not the meta") {
    // (2, 2, 2) weights with no meta read back as (B, Tq, Tk); carrying (H, Tq, Tk) they
    // are two heads of one unbatched item, in CSV's head column and the table's headings.
    SUBCASE("heads first") {
        document doc;
        doc.tensors.push_back(tensor("weights", {2, 2, 2}, {"H", "Tq", "Tk"}));
        const std::string csv = csv_of(doc);
        CHECK(lines_starting(csv, "weights,0,1,") .size() == 4);  // batch 0, head 1
        CHECK(lines_starting(csv, "weights,1,").empty());         // no batch 1
        CHECK(lines_starting(table_of(doc), "head ") == std::vector<std::string>{"head 0", "head 1"});
        document bare_doc;
        bare_doc.tensors.push_back(bare(doc.tensors[0]));
        CHECK(lines_starting(csv_of(bare_doc), "weights,1,0,").size() == 4);  // read back: batch 1, head 0
        CHECK(lines_starting(table_of(bare_doc), "batch ") == std::vector<std::string>{"batch 0", "batch 1"});
        const attn::io::heatmap_spec spec = attn::io::heatmap_from_document(doc, attn::io::heatmap_view{});
        CHECK(spec.values.shape == shape_t{1, 2, 2, 2});
    }
    SUBCASE("one batch item and one head of several layers") {
        // (L, B, H, Tq, Tk) = (2, 1, 1, 2, 2): rank 5 is CSV's only with a layer axis.
        document doc;
        doc.tensors.push_back(tensor("weights", {2, 1, 1, 2, 2}, {"L", "B", "H", "Tq", "Tk"}));
        const std::string csv = csv_of(doc);
        CHECK(csv.rfind(attn::io::csv_header(true), 0) == 0);
        CHECK(lines_starting(csv, "weights,0,0,0,").size() == 4);  // layer 0, batch 0, head 0
        CHECK(lines_starting(csv, "weights,1,0,0,").size() == 4);  // layer 1
        CHECK(lines_starting(table_of(doc), "layer ") ==
              std::vector<std::string>{"layer 0, batch 0, head 0", "layer 1, batch 0, head 0"});
        document bare_doc;
        bare_doc.tensors.push_back(bare(doc.tensors[0]));
        CHECK_THROWS_AS(csv_of(bare_doc), attn::shape_error);  // no meta: rank 5 is refused
    }
    SUBCASE("a layer axis on (L, Tq, Tk)") {
        document doc;
        doc.tensors.push_back(tensor("weights", {2, 2, 2}, {"L", "Tq", "Tk"}));
        CHECK(lines_starting(table_of(doc), "layer ") == std::vector<std::string>{"layer 0", "layer 1"});
        CHECK(csv_of(doc).rfind(attn::io::csv_header(true), 0) == 0);
        // Another tensor of the document without one is refused, as under meta "layer": "all".
        doc.tensors.push_back(tensor("scores", {2, 2}, {"Tq", "Tk"}));
        CHECK_THROWS_AS(csv_of(doc), attn::shape_error);
    }
    SUBCASE("axes that disagree with the rank are the pipeline's bug") {
        document doc;
        doc.tensors.push_back(tensor("weights", {2, 2, 2}, {"Tq", "Tk"}));
        CHECK_THROWS_AS(attn::io::tensor_axes(doc, doc.tensors[0]), std::logic_error);
    }
}

TEST_CASE("tensor axes: a document read back gets them from its meta") {
    document doc;
    doc.meta = {{"heads", 2u}, {"average_heads", false}};  // unsigned, as the pipeline writes it
    doc.tensors.push_back(tensor("weights", {2, 3, 3}));
    doc.tensors.push_back(tensor("lse", {2, 3}));
    doc.tensors.push_back(tensor("q", {3, 8}));
    doc.tensors.push_back(tensor("w_q", {8, 8}));
    CHECK(attn::io::tensor_axes(doc, doc.tensors[0]) == axes_t{"H", "Tq", "Tk"});
    CHECK(attn::io::tensor_axes(doc, doc.tensors[1]) == axes_t{"H", "Tq"});
    CHECK(attn::io::tensor_axes(doc, doc.tensors[2]) == axes_t{"Tq", "H·D"});
    CHECK(attn::io::tensor_axes(doc, doc.tensors[3]) == axes_t{"", ""});  // not a stage: unnamed
    doc.meta["average_heads"] = true;
    CHECK(attn::io::tensor_axes(doc, doc.tensors[0]) == axes_t{"B", "Tq", "Tk"});
    doc.meta = {{"heads", 2u}, {"model", {{"layer", "all"}}}};
    doc.tensors = {tensor("weights", {2, 2, 3, 3})};
    CHECK(attn::io::tensor_axes(doc, doc.tensors[0]) == axes_t{"L", "H", "Tq", "Tk"});
}

TEST_CASE("tensor axes: the pipeline's equal the meta's for every layout") {
    const std::vector<std::string> dump{"x", "q_proj", "k_proj", "q", "k", "v", "qk", "scaled", "scores", "weights",
                                        "output", "lse", "present_key", "present_value", "mask", "stats", "head_stats"};
    struct run {
        const char* what;
        shape_t x;
        std::size_t heads;
        bool average;
        attn::pipeline_options::input_layout layout;
        axes_t weights, q;
    };
    using L = attn::pipeline_options::input_layout;
    const std::vector<run> runs{
        {"unbatched, two heads", {4, 8}, 2, false, L::by_rank, {"H", "Tq", "Tk"}, {"Tq", "H·D"}},
        {"unbatched, one head", {4, 8}, 1, false, L::by_rank, {"Tq", "Tk"}, {"Tq", "H·D"}},
        {"batched, two heads", {2, 4, 8}, 2, false, L::by_rank, {"B", "H", "Tq", "Tk"}, {"B", "Tq", "H·D"}},
        {"batched, one head", {2, 4, 8}, 1, false, L::by_rank, {"B", "Tq", "Tk"}, {"B", "Tq", "H·D"}},
        {"batched, averaged", {2, 4, 8}, 2, true, L::by_rank, {"B", "Tq", "Tk"}, {"B", "Tq", "H·D"}},
        {"unbatched, averaged", {4, 8}, 2, true, L::by_rank, {"Tq", "Tk"}, {"Tq", "H·D"}},
        {"(B, H, T, D)", {2, 2, 4, 4}, 0, false, L::by_rank, {"B", "H", "Tq", "Tk"}, {"B", "H", "Tq", "D"}},
        {"(B, T, H, D)", {2, 4, 2, 4}, 0, false, L::bthd, {"B", "H", "Tq", "Tk"}, {"B", "Tq", "H", "D"}},
        {"(T, B, E)", {4, 2, 8}, 2, false, L::tbe, {"B", "H", "Tq", "Tk"}, {"Tq", "B", "H·D"}},
    };
    for (const run& r : runs) {
        INFO(std::string(r.what));
        attn::pipeline_options o;
        o.dump = dump;
        o.attention.rope = attn::core::rope_style::half;  // q_proj and k_proj are Q and K before it
        o.heads = r.heads;
        o.average_heads = r.average;
        o.layout_of_inputs = r.layout;
        const document doc = attn::compute(random_inputs(r.x), {}, o);
        for (const named_array& t : doc.tensors) {
            if (t.name == "weights") CHECK(t.axes == r.weights);
            if (t.name == "q") CHECK(t.axes == r.q);
        }
        check_carried_match_meta(doc);
    }
}

TEST_CASE("tensor axes: a checkpoint's stacked layers carry the layer axis") {
    attn::checkpoint_options ck;
    ck.path = std::string(ATTN_SOURCE_DIR) + "/data/gpt2-tiny/model.safetensors";
    attn::pipeline_options o;
    o.ids = {1, 2, 3, 4};
    o.dump = {"weights", "q", "lse", "head_stats"};
    const document all = attn::compute_checkpoint(ck, {}, {}, o);
    for (const named_array& t : all.tensors) {
        INFO(t.name);
        CHECK(attn::io::has_layer_axis(t.axes));
    }
    check_carried_match_meta(all);
    ck.layer = 1;
    const document one = attn::compute_checkpoint(ck, {}, {}, o);
    for (const named_array& t : one.tensors) CHECK_FALSE(attn::io::has_layer_axis(t.axes));
    check_carried_match_meta(one);
}
