// attn view's page (io/html.hpp): the document's Tq×Tk stages quantised layer by layer,
// deflated and base64-encoded into one data block per layer ("chunks", written as the
// layers come), then a JSON block of what the page shows, with the script and styles of
// src/io/html/ inline. html/data.cpp writes the chunks and the records of them, html/page.cpp
// the page around them; this file puts a page together, whole or streamed layer by layer.
#include "attn/io/html.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <optional>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/io/plot.hpp"
#include "attn/io/writers.hpp"
#include "attn/text.hpp"
#include "html/page_parts.hpp"

namespace attn::io {

using namespace html_detail;

int view_bits(std::size_t cells) { return cells <= (std::size_t{16} << 20) ? 16 : 8; }

std::size_t view_data_bytes(const std::vector<view_input>& inputs) {
    std::size_t cells = 0, rollouts = 0;
    for (const view_input& in : inputs) {
        std::size_t rollout = 0;
        cells += viewed_cells(*in.doc, in.name, rollout);
        rollouts += rollout;
    }
    return (cells + rollouts) * static_cast<std::size_t>(view_bits(cells) / 8);
}

std::size_t view_data_bytes(const document& doc, const std::string& source) { return view_data_bytes({{source, &doc}}); }

void write_html(std::ostream& out, const document& doc, const std::string& source) { write_html(out, {{source, &doc}}); }

void write_html(std::ostream& out, const std::vector<view_input>& inputs) {
    if (inputs.empty()) throw value_error("view", "no input to view");
    std::size_t cells = 0;
    for (const view_input& in : inputs) {
        std::size_t rollout = 0;
        cells += viewed_cells(*in.doc, in.name, rollout);
    }
    const int bits = view_bits(cells);  // of the stages: the rollout, 1/(L·H) of the weights, follows them
    const bool many = inputs.size() > 1;
    std::string source;
    for (std::size_t k = 0; k < inputs.size(); ++k) source += (k ? ", " : "") + inputs[k].name;
    write_page_head(out, source);

    // One input: its data is the page's (no "inputs"), as it was before pages of several.
    nlohmann::ordered_json data;
    bool any_rollout = false;
    std::string settings;
    if (!many) {
        const input_page page = write_input_chunks(out, *inputs[0].doc, 0, bits);
        any_rollout = page.rollout.has_value();
        data = input_data(*inputs[0].doc, page, bits, head_stat_rows(*inputs[0].doc));
        settings = meta_html(inputs[0].doc->meta);
    } else {
        data["inputs"] = nlohmann::ordered_json::array();
        for (std::size_t k = 0; k < inputs.size(); ++k) {
            const input_page page = write_input_chunks(out, *inputs[k].doc, k, bits);
            nlohmann::ordered_json one;
            one["name"] = valid_utf8(inputs[k].name);
            nlohmann::ordered_json part = input_data(*inputs[k].doc, page, bits, head_stat_rows(*inputs[k].doc));
            for (auto it = part.begin(); it != part.end(); ++it) one[it.key()] = std::move(it.value());
            data["inputs"].push_back(std::move(one));
            any_rollout = any_rollout || page.rollout.has_value();
            // Each input's settings, shown with it (the page's script switches them).
            settings += meta_html(inputs[k].doc->meta, " class=\"meta\" data-input=\"" + std::to_string(k) + "\"" +
                                                           (k ? " style=\"display:none\"" : ""));
        }
    }
    write_page_tail(out, source, settings, many, bits, any_rollout, std::move(data));
    if (!out) throw io_error(source, "write failed");
}

namespace {

/// Flushes `out`; throws io_error("", "cannot write output (<why>)") when it failed (a
/// full disk, `ulimit -f`): the caller names the destination.
void check_written(std::ostream& out) {
    out.flush();
    if (!out) throw io_error("", "cannot write output (" + std::system_category().message(errno ? errno : EIO) + ")");
}

}  // namespace

struct html_stream::impl {
    impl(std::ostream& o, std::string s) : out(o), source(std::move(s)) {}
    std::ostream& out;
    std::string source;
    bool keep_single_rollout = false;
    std::size_t count = 0, appended = 0;
    int bits = 16;
    input_page page;
    std::vector<std::pair<std::string, shape_t>> plan;  // the first layer's viewed stages
    nlohmann::ordered_json head_rows = nlohmann::ordered_json::array();
    bool head_stats = true;  // every layer had them
    // A layer in pieces (begin_layer … end_layer): its chunk, the cells it still needs.
    bool open = false;
    std::size_t cells_left = 0;
    std::unique_ptr<chunk_writer> chunk;
};

html_stream::html_stream(std::ostream& out, std::string source, bool rollout_asked)
    : p_(std::make_unique<impl>(out, std::move(source))) {
    p_->keep_single_rollout = rollout_asked;
}

html_stream::~html_stream() = default;

/// The viewed stages of `layer` checked against the page's plan (the first layer makes
/// it and writes the page's head), as append() and begin_layer() take a layer.
std::vector<const named_array*> html_stream::start_layer(const document& layer, std::size_t count) {
    impl& p = *p_;
    const auto stages = viewed(layer);
    if (p.appended == 0 && !p.open) {
        std::size_t rollout = 0;
        const std::size_t cells = viewed_cells(layer, p.source, rollout);
        p.count = count;
        p.bits = view_bits(cells * count);
        for (const auto* t : stages) {
            p.plan.emplace_back(t->name, t->value.shape);
            p.page.stages.push_back(record_of(layer, *t, count));
        }
        write_page_head(p.out, p.source);
    }
    bool same = stages.size() == p.plan.size() && p.appended < p.count && !p.open;
    for (std::size_t i = 0; same && i < stages.size(); ++i)
        same = stages[i]->name == p.plan[i].first && stages[i]->value.shape == p.plan[i].second;
    if (!same) {
        std::string want, got;
        for (const auto& [name, shape] : p.plan) want += (want.empty() ? "" : ", ") + name + " " + shape_string(shape);
        for (const auto* t : stages) got += (got.empty() ? "" : ", ") + t->name + " " + shape_string(t->value.shape);
        if (p.appended >= p.count) want = std::to_string(p.count) + " layers", got = "another";
        throw shape_error(stages.empty() ? std::string("html") : stages.front()->name,
                          "does not continue its streamed page " + expected_got(want, got));
    }
    return stages;
}

/// The layer's head statistics as rows of the page's table, numbered by the layer axis;
/// then the next layer.
void html_stream::end_layer_rows(const document& layer) {
    impl& p = *p_;
    nlohmann::ordered_json rows = head_stat_rows(layer);
    if (rows.is_null()) p.head_stats = false;
    else
        for (auto& row : rows["rows"]) {
            row[0] = p.appended;
            p.head_rows.push_back(std::move(row));
        }
    ++p.appended;
    check_written(p.out);
}

void html_stream::append(const document& layer, std::size_t count) {
    impl& p = *p_;
    const auto stages = start_layer(layer, count);
    for (std::size_t i = 0; i < stages.size(); ++i)
        write_chunk(p.out, 0, std::to_string(i), p.appended, stages[i]->value, 0, stages[i]->value.size(),
                    page_masked(layer, *stages[i]), p.bits, p.page.stages[i]);
    end_layer_rows(layer);
}

void html_stream::begin_layer(const document& layer, std::size_t count) {
    impl& p = *p_;
    for (const auto& t : layer.tensors)
        if (tensor_kind(t.name) == stage_kind::scores || tensor_kind(t.name) == stage_kind::mask)
            throw value_error(t.name, "a page in pieces takes weights alone (their masked cells are their zeros)");
    const auto stages = start_layer(layer, count);
    if (stages.size() != 1 || tensor_kind(stages.front()->name) != stage_kind::weights)
        throw value_error(stages.front()->name, "a page in pieces takes weights alone " +
                                                    expected_got(stage_name(stage::weights), stages.front()->name));
    p.open = true;
    p.cells_left = stages.front()->value.size();
    p.chunk = std::make_unique<chunk_writer>(p.out, 0, "0", p.appended, 0.0, 1.0, p.bits, p.page.stages.front());
}

void html_stream::add_cells(const array& piece, std::size_t begin, std::size_t n) {
    impl& p = *p_;
    if (!p.open || n > p.cells_left || begin + n > piece.size())
        throw shape_error(stage_name(stage::weights), "pieces do not fit the layer " +
                                         expected_got(std::to_string(p.open ? p.cells_left : 0) + " cells more at most", std::to_string(n)));
    // The masked cells of lone weights (masked_cells): their exact zeros.
    p.chunk->add(piece, begin, n, nullptr, true);
    p.cells_left -= n;
    if (!p.out) check_written(p.out);  // a full disk stops the page at once, not at the layer's end
}

void html_stream::end_layer(const document& stats) {
    impl& p = *p_;
    if (!p.open || p.cells_left != 0)
        throw shape_error(stage_name(stage::weights), "streamed in part " + expected_got("the layer's every cell", std::to_string(p.cells_left) + " cells fewer"));
    p.chunk->finish();
    p.chunk.reset();
    p.open = false;
    end_layer_rows(stats);
}

void html_stream::finish(const document& run) {
    impl& p = *p_;
    if (p.appended != p.count || p.appended == 0 || p.open)
        throw shape_error(p.plan.empty() ? std::string("html") : p.plan.front().first,
                          "streamed in part " + expected_got(std::to_string(p.count) + " layers", std::to_string(p.appended)));
    // A rollout of one layer is not shown unless asked for (add_rollout makes none).
    if (p.count >= 2 || p.keep_single_rollout) write_rollout_chunk(p.out, run, 0, p.bits, p.page);
    nlohmann::ordered_json rows;
    if (p.head_stats) rows["rows"] = std::move(p.head_rows);
    write_page_tail(p.out, p.source, meta_html(run.meta), false, p.bits, p.page.rollout.has_value(),
                    input_data(run, p.page, p.bits, std::move(rows)));
    check_written(p.out);
}

}  // namespace attn::io
