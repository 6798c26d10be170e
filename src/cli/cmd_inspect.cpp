// attn inspect: what is in .npy/.npz/JSON files — names, dtypes, shapes, byte order and
// summary statistics of every array.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "attn/core/summary.hpp"
#include "attn/error.hpp"
#include "attn/text.hpp"
#include "attn/io/listing.hpp"
#include "columns.hpp"
#include "commands.hpp"
#include "pipeline_options.hpp"

namespace attn::cli {

namespace {

struct inspect_cli {
    std::vector<std::string> files;
    std::string format = "table";
};

std::string number_text(double v) {
    if (std::isnan(v)) return "-";
    return general_number(v);
}

void print_file_table(std::ostream& out, const std::string& file, const std::vector<io::listed_array>& arrays) {
    out << file << '\n';
    if (arrays.empty()) {
        out << "(no arrays)\n";
        return;
    }
    std::vector<std::vector<std::string>> rows{
        {"name", "dtype", "shape", "byte order", "min", "max", "mean", "std", "nan", "+inf", "-inf"}};
    for (const auto& a : arrays) {
        const core::array_summary s = core::summarize(a.value);
        rows.push_back({a.name.empty() ? "-" : a.name, std::string(dtype_name(a.value.type)), shape_string(a.value.shape),
                        a.byte_order, number_text(s.min), number_text(s.max), number_text(s.mean), number_text(s.std),
                        std::to_string(s.nan), std::to_string(s.pos_inf), std::to_string(s.neg_inf)});
    }
    print_columns(out, rows, 4);
}

nlohmann::ordered_json number_json(double v) { return std::isnan(v) ? nlohmann::ordered_json() : nlohmann::ordered_json(v); }

nlohmann::ordered_json file_json(const std::string& file, const std::vector<io::listed_array>& arrays) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& a : arrays) {
        const core::array_summary s = core::summarize(a.value);
        nlohmann::ordered_json j;
        j["name"] = a.name.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(a.name);
        j["dtype"] = std::string(dtype_name(a.value.type));
        j["shape"] = a.value.shape;
        j["byte_order"] = a.byte_order;
        j["count"] = s.count;
        j["min"] = number_json(s.min);
        j["max"] = number_json(s.max);
        j["mean"] = number_json(s.mean);
        j["std"] = number_json(s.std);
        j["nan"] = s.nan;
        j["posinf"] = s.pos_inf;
        j["neginf"] = s.neg_inf;
        list.push_back(std::move(j));
    }
    return {{"file", file}, {"arrays", std::move(list)}};
}

std::string dump(const nlohmann::ordered_json& j) {
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

int run_inspect(const inspect_cli& c) {
    int status = exit_ok;
    bool first = true;
    for (const auto& file : c.files) {
        std::vector<io::listed_array> arrays;
        try {
            arrays = io::list_arrays(file);
        } catch (const error& e) {
            // Like a batch run: the bad file is reported, the others still are listed.
            std::cout.flush();
            std::cerr << "attn: error: " << e.what() << '\n';
            if (c.format == "json") std::cout << dump({{"file", file}, {"error", e.what()}}) << '\n';
            status = exit_data_error;
            continue;
        }
        if (c.format == "json") {
            std::cout << dump(file_json(file, arrays)) << '\n';
        } else {
            if (!first) std::cout << '\n';
            print_file_table(std::cout, file, arrays);
        }
        first = false;
    }
    std::cout.flush();
    return status;
}

}  // namespace

void setup_inspect(CLI::App& app, int& exit_status) {
    auto c = std::make_shared<inspect_cli>();
    CLI::App* sub = app.add_subcommand(
        "inspect",
        "List the arrays in .npy/.npz/JSON files (attn's own JSON output too): name, dtype, shape, byte order as "
        "stored, min/max/mean/std over the finite values (float64) and NaN/+inf/-inf counts.");
    sub->add_option("FILE", c->files, "Files to list (.npy, .npz, .json, or - for stdin)")->required();
    sub->add_option("--format", c->format, "table (default) or json (one object per file and line, arrays in file order)")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
    add_max_bytes_option(*sub);
    sub->footer(
        "Examples:\n"
        "  attn inspect in.npz\n"
        "  attn inspect out.json --format json | jq -c '.arrays[].shape'\n"
        "  attn inspect *.npy");
    sub->callback([c, &exit_status]() { exit_status = run_inspect(*c); });
}

}  // namespace attn::cli
