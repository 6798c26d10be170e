// The stage table (include/attn/stages.hpp): the one place a stage name is spelled.
#include "attn/stages.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <type_traits>

#include "attn/error.hpp"

namespace attn {

const std::vector<stage_info>& stage_table() {
    using k = stage_kind;
    using d = stage_dtype;
    static const stage_info rows[] = {
        // id                 name             axes                 kind          dtype                 drawn view   proves per_run
        {stage::x,             "x",             "B, T, E",           k::vectors,   d::compute,           0, false, false, false, {}},
        {stage::x_norm,        "x_norm",        "B, T, E",           k::vectors,   d::compute,           0, false, false, false, {}},
        {stage::q_proj,        "q_proj",        "B, Tq, H·D",        k::vectors,   d::compute,           0, false, false, false, {}},
        {stage::k_proj,        "k_proj",        "B, Tk, Hkv·D",      k::vectors,   d::compute,           0, false, false, false, {}},
        {stage::q,             "q",             "B, H, Tq, D",       k::vectors,   d::compute,           0, false, false, false, {}},
        {stage::k,             "k",             "B, Hkv, Tk, D",     k::vectors,   d::compute,           0, false, false, false, {}},
        {stage::v,             "v",             "B, Hkv, Tk, Dv",    k::vectors,   d::compute,           0, false, false, false, {}},
        {stage::qk,            "qk",            "B, H, Tq, Tk",      k::logits,    d::compute,           4, false, true,  false, {}},
        {stage::scaled,        "scaled",        "B, H, Tq, Tk",      k::logits,    d::compute,           3, false, true,  false, {}},
        {stage::scores,        "scores",        "B, H, Tq, Tk",      k::scores,    d::compute,           2, true,  true,  false, {}},
        {stage::weights,       "weights",       "B, H, Tq, Tk",      k::weights,   d::compute,           1, true,  true,  false, {}},
        {stage::output,        "output",        "B, H, Tq, Dv",      k::vectors,   d::compute,           0, false, true,  false, {}},
        {stage::lse,           "lse",           "B, H, Tq",          k::per_row,   d::compute,           0, false, true,  false, {}},
        {stage::present_key,   "present_key",   "B, Hkv, P+Tk, D",   k::vectors,   d::compute,           0, false, true,  false, {}},
        {stage::present_value, "present_value", "B, Hkv, P+Tk, Dv",  k::vectors,   d::compute,           0, false, true,  false, {}},
        {stage::mask,          "mask",          "B, H, Tq, Tk",      k::mask,      d::boolean,           0, true,  false, false, {}},
        {stage::stats,         "stats",         "(), B, H, Tq",      k::statistics, d::compute_and_int64, 0, false, false, false,
         {"dk", "var_q", "var_k", "var_qk", "var_scaled", "entropy", "max_weight", "argmax", "row_sum"}},
        {stage::head_stats,    "head_stats",    "B, H",              k::per_head,  d::compute,           0, true,  false, false,
         {"entropy", "max_weight", "distance", "sink_mass", "small_share"}},
        {stage::rollout,       "rollout",       "B, Tq, Tk",         k::rollout,   d::float64,           0, false, false, true,  {}},
        {stage::word_weights,  "word_weights",  "B, H, Wq, Wk",      k::words,     d::float64,           5, false, true,  false, {}},
    };
    static_assert(std::extent_v<decltype(rows)> == stage_count,
                  "the stage table needs one row per enumerator of attn::stage (include/attn/stages.hpp)");
    static const std::vector<stage_info> table(std::begin(rows), std::end(rows));
    return table;
}

const stage_info& stage_row(stage s) {
    for (const auto& row : stage_table())
        if (row.id == s) return row;
    throw std::logic_error("stage_row: not a stage");
}

const std::string& stage_name(stage s) { return stage_row(s).name; }

std::string stage_list(const std::string& separator, const std::string& last) {
    std::string s;
    const auto& table = stage_table();
    for (std::size_t i = 0; i < table.size(); ++i)
        s += (i == 0 ? "" : i + 1 == table.size() && !last.empty() ? last : separator) + table[i].name;
    return s;
}

stage parse_stage(const std::string& name) {
    for (const auto& row : stage_table())
        if (row.name == name) return row.id;
    throw usage_error("--dump", "unknown stage '" + name + "' (expected " + stage_list(", ", " or ") + ")");
}

bool made_per_run(const std::string& tensor_name) {
    const std::string head = tensor_name.substr(0, tensor_name.find('.'));
    for (const auto& row : stage_table())
        if (row.name == head) return row.per_run;
    return false;
}

stage_kind tensor_kind(const std::string& tensor_name) {
    const auto dot = tensor_name.find('.');
    const std::string head = tensor_name.substr(0, dot);
    for (const auto& row : stage_table()) {
        if (row.name != head) continue;
        if (dot == std::string::npos) return row.parts.empty() ? row.kind : stage_kind::unknown;
        if (row.kind == stage_kind::per_head) return row.kind;  // any head_stats.<part>
        const std::string part = tensor_name.substr(dot + 1);
        bool known = false;
        for (const auto& p : row.parts) known = known || p == part;
        if (!known) return stage_kind::unknown;
        if (row.kind == stage_kind::statistics)  // the variances and dk are 0-d, the rest per row
            return part == "dk" || part.rfind("var_", 0) == 0 ? stage_kind::scalar : stage_kind::per_row;
        return row.kind;
    }
    return stage_kind::unknown;
}

std::vector<std::string> full_axes(const std::string& tensor_name) {
    const stage_kind kind = tensor_kind(tensor_name);
    if (kind == stage_kind::unknown || kind == stage_kind::scalar) return {};
    const auto dot = tensor_name.find('.');
    // The parts of stats and head_stats: the per-row ones as lse, the per-head ones (B, H).
    const std::string& text = kind == stage_kind::per_row && dot != std::string::npos ? stage_row(stage::lse).axes
                              : kind == stage_kind::per_head                         ? stage_row(stage::head_stats).axes
                                                                                     : stage_row(parse_stage(tensor_name)).axes;
    std::vector<std::string> axes;
    for (std::size_t begin = 0; begin <= text.size();) {
        const std::size_t comma = std::min(text.find(", ", begin), text.size());
        axes.push_back(text.substr(begin, comma - begin));
        begin = comma + 2;
    }
    return axes;
}

std::vector<std::string> fit_axes(const std::string& tensor_name, std::size_t rank, bool heads_kept) {
    std::vector<std::string> full = full_axes(tensor_name);
    if (rank == full.size()) return full;
    const std::size_t dot = full.size() == 3 ? full[2].find("·") : std::string::npos;
    if (rank == 4 && dot != std::string::npos && tensor_kind(tensor_name) == stage_kind::vectors)
        // (B, T, H·D) of a 4-D input: the heads apart, (B, H, T, D).
        return {full[0], full[2].substr(0, dot), full[1], full[2].substr(dot + std::string("·").size())};
    if (rank > full.size()) return {};
    const std::size_t short_by = full.size() - rank;
    const bool heads_second = full.size() >= 3 && full[1].rfind('H', 0) == 0;  // (B, H or Hkv, …)
    const auto drop = [&](const std::string axis) { full.erase(std::find(full.begin(), full.end(), axis)); };
    switch (tensor_kind(tensor_name)) {
        case stage_kind::vectors:
            if (heads_second && full.size() == 4) {
                // (B, H, T, D) in the input's layout: heads merged into the last axis.
                std::vector<std::string> merged{full[0], full[2], full[1] + "·" + full[3]};
                if (short_by == 2) merged.erase(merged.begin());
                return short_by <= 2 ? merged : std::vector<std::string>{};
            }
            if (short_by == 1 && full[0] == "B") drop("B");
            else return {};
            return full;
        case stage_kind::logits:
        case stage_kind::scores:
        case stage_kind::weights:
        case stage_kind::mask:
        case stage_kind::per_row:
        case stage_kind::words:
            if (!heads_second || short_by > 2) return {};
            if (short_by == 2 || !heads_kept) drop(full[1]);
            if (short_by == 2 || heads_kept) drop("B");
            return full;
        case stage_kind::per_head:
            if (short_by == 1) drop("B");
            else return {};
            return full;
        case stage_kind::rollout:
            if (short_by == 1) drop("B");
            else return {};
            return full;
        default: return {};
    }
}

bool is_matrix(stage_kind k) {
    return k == stage_kind::logits || k == stage_kind::scores || k == stage_kind::weights || k == stage_kind::mask ||
           k == stage_kind::words;
}

const std::string& stage_of_kind(stage_kind k) {
    const stage_info* found = nullptr;
    for (const auto& row : stage_table())
        if (row.kind == k) {
            if (found) throw std::logic_error("stage_of_kind: several stages of this kind");
            found = &row;
        }
    if (!found) throw std::logic_error("stage_of_kind: no stage of this kind");
    return found->name;
}

std::vector<std::string> default_dump() {
    return {stage_name(stage::scores), stage_name(stage::weights), stage_name(stage::output)};
}

std::vector<std::string> drawn_stages() {
    std::vector<std::string> out;
    for (int place = 1;; ++place) {
        const std::size_t before = out.size();
        for (const auto& row : stage_table())
            if (row.drawn == place) out.push_back(row.name);
        if (out.size() == before) return out;
    }
}

std::vector<std::string> view_stages() {
    std::vector<std::string> out;
    for (const std::string& name : drawn_stages())
        if (stage_row(parse_stage(name)).for_view) out.push_back(name);
    for (const auto& row : stage_table())
        if (row.for_view && !row.drawn) out.push_back(row.name);
    return out;
}

std::vector<std::string> plot_stages() {
    std::vector<std::string> out;
    for (const auto& row : stage_table())
        if (row.kind == stage_kind::logits || row.kind == stage_kind::scores || row.kind == stage_kind::weights)
            out.push_back(row.name);
    return out;
}

}  // namespace attn
