// attn compare: are two arrays close, as torch.testing.assert_close judges it?
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include "attn/io/formats.hpp"
#include "attn/core/analysis.hpp"
#include "attn/core/compare.hpp"
#include "attn/error.hpp"
#include "attn/text.hpp"
#include "attn/io/input.hpp"
#include "attn/io/listing.hpp"
#include "attn/io/npy.hpp"
#include "columns.hpp"
#include "commands.hpp"
#include "pipeline_cli.hpp"
#include "weights_input.hpp"

namespace attn::cli {

namespace {

struct compare_cli {
    std::string a, b;  // actual, expected: FILE or FILE:NAME
    double rtol = 0, atol = 0;
    std::string name;
    CLI::Option* rtol_opt = nullptr;
    CLI::Option* atol_opt = nullptr;
    bool per_head = false;
    std::size_t top = 10;
    std::string format;
    CLI::Option* top_opt = nullptr;
    CLI::Option* format_opt = nullptr;
};

/// FILE:NAME split as io::load_array splits it: a path that exists is never split, and a
/// ':' inside the path or the name is kept where it belongs (io::split_array_spec).
std::pair<std::string, std::string> split_spec(const std::string& spec) { return io::split_array_spec(spec); }

bool is_npy_file(const std::string& path) {
    if (path == "-") return false;
    std::ifstream in(path, std::ios::binary);
    char head[6] = {};
    in.read(head, sizeof head);
    return in.gcount() == sizeof head && io::is_npy(std::string_view(head, sizeof head));
}

/// The array a spec names. --name applies to specs without ":NAME" other than a lone
/// .npy. Dotted names ("out.json:stats.var_qk") are members of attn's nested JSON
/// objects, which load_array's reader does not open: io::list_arrays does.
array load(const std::string& spec, const std::string& name) {
    auto [path, member] = split_spec(spec);
    if (member.empty() && !name.empty() && !is_npy_file(path)) member = name;
    const std::string full = member.empty() ? path : path + ":" + member;
    try {
        return io::load_array(full);
    } catch (const limit_error&) {
        throw;
    } catch (const value_error&) {
        if (member.find('.') == std::string::npos) throw;
        for (auto& a : io::list_arrays(path))
            if (lower(a.name) == lower(member)) return std::move(a.value);
        throw;
    }
}

std::string number(double v) { return general_number(v); }

/// a and b with as many significant digits (6 to 17) as it takes to tell them apart.
std::pair<std::string, std::string> distinct(double a, double b) {
    for (int digits = 6;; ++digits) {
        std::string sa = general_number(a, digits), sb = general_number(b, digits);
        if (sa != sb || a == b || (std::isnan(a) && std::isnan(b)) || digits == 17) return {sa, sb};
    }
}

std::string index_text(const shape_t& shape, std::size_t offset) {
    std::vector<std::size_t> index(shape.size(), 0);
    for (std::size_t d = shape.size(); d-- > 0;) {
        index[d] = offset % shape[d];
        offset /= shape[d];
    }
    std::string s = "(";
    for (std::size_t i = 0; i < index.size(); ++i) s += (i ? ", " : "") + std::to_string(index[i]);
    return s + (index.size() == 1 ? ",)" : ")");
}

core::compare_result compare_with(const array& a, const array& b, const compare_cli& c, core::tolerance& tol) {
    tol = core::default_tolerance(a.type, b.type);
    if (c.rtol_opt->count()) tol.rtol = c.rtol;
    if (c.atol_opt->count()) tol.atol = c.atol;
    return core::compare(a, b, tol.rtol, tol.atol);
}

/// The report of one pair: dtypes, tolerance, errors and where, worst element,
/// mismatches, verdict.
bool report(std::ostream& out, const array& a, const array& b, const compare_cli& c) {
    core::tolerance tol;
    const core::compare_result r = compare_with(a, b, c, tol);
    out << "dtypes: " << dtype_name(a.type) << ", " << dtype_name(b.type) << "; shape " << shape_string(a.shape) << '\n';
    out << "tolerance: rtol " << number(tol.rtol) << ", atol " << number(tol.atol) << '\n';
    if (r.nonfinite_mismatched)
        out << "NaN/inf mismatch: " << r.nonfinite_mismatched << (r.nonfinite_mismatched == 1 ? " position" : " positions")
            << ", first at " << index_text(a.shape, r.worst_offset) << '\n';
    out << "max abs error: " << number(r.max_abs_error);
    if (r.max_abs_error > 0) out << " at " << index_text(a.shape, r.max_abs_offset);
    out << "\nmax rel error: " << number(r.max_rel_error);
    if (r.max_rel_error > 0) out << " at " << index_text(a.shape, r.max_rel_offset);
    out << '\n';
    if (r.count > 0) {
        const auto [wa, wb] = distinct(r.worst_a, r.worst_b);
        out << "worst index: " << index_text(a.shape, r.worst_offset) << " (a = " << wa << ", b = " << wb << ")\n";
    }
    out << "mismatched: " << r.mismatched << " of " << r.count << '\n';
    out << (r.close ? "close" : "not close") << '\n';
    return r.close;
}

std::string names_text(const std::vector<std::string>& names) {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
    return s;
}

/// Two whole files that both hold several arrays: every array they share by name, one
/// line each, then the names only one side holds and one verdict over the shared ones.
int compare_bundles(const std::vector<io::listed_array>& a, const std::string& path_a,
                    const std::vector<io::listed_array>& b, const std::string& path_b, const compare_cli& c) {
    const auto find = [](const std::vector<io::listed_array>& in, const std::string& name) -> const io::listed_array* {
        for (const auto& x : in)
            if (x.name == name) return &x;
        return nullptr;
    };
    std::vector<std::string> only_a, only_b, differ;
    std::vector<std::vector<std::string>> rows{{"name", "shape", "dtypes", "rtol", "atol", "max abs error", "at",
                                                "max rel error", "at", "worst (a, b)", "mismatched", "verdict"}};
    for (const auto& x : a) {
        const io::listed_array* y = find(b, x.name);
        if (!y) {
            only_a.push_back(x.name);
            continue;
        }
        const std::string dtypes = std::string(dtype_name(x.value.type)) + ", " + std::string(dtype_name(y->value.type));
        if (x.value.shape != y->value.shape) {
            rows.push_back({x.name, shape_string(x.value.shape) + " vs " + shape_string(y->value.shape), dtypes, "-", "-",
                            "-", "-", "-", "-", "-", "-", "not close"});
            differ.push_back(x.name);
            continue;
        }
        core::tolerance tol;
        const core::compare_result r = compare_with(x.value, y->value, c, tol);
        const bool any = r.count > 0;
        const auto [wa, wb] = distinct(r.worst_a, r.worst_b);
        rows.push_back({x.name, shape_string(x.value.shape), dtypes, number(tol.rtol), number(tol.atol),
                        number(r.max_abs_error), r.max_abs_error > 0 ? index_text(x.value.shape, r.max_abs_offset) : "-",
                        number(r.max_rel_error), r.max_rel_error > 0 ? index_text(x.value.shape, r.max_rel_offset) : "-",
                        any ? index_text(x.value.shape, r.worst_offset) + " " + wa + ", " + wb : "-",
                        std::to_string(r.mismatched) + " of " + std::to_string(r.count),
                        r.close ? "close" : "not close"});
        if (!r.close) differ.push_back(x.name);
    }
    for (const auto& y : b)
        if (!find(a, y.name)) only_b.push_back(y.name);
    const std::size_t shared = rows.size() - 1;
    if (shared == 0)
        throw value_error(path_b, "no array name in common with " + path_a + " (A holds " + names_text(only_a) +
                                      "; B holds " + names_text(only_b) + ")");
    std::ostream& out = std::cout;
    print_columns(out, rows, rows.front().size());  // all text, left-aligned
    if (!only_a.empty()) out << "only in A (not compared): " << names_text(only_a) << '\n';
    if (!only_b.empty()) out << "only in B (not compared): " << names_text(only_b) << '\n';
    if (differ.empty())
        out << "close (" << shared << (shared == 1 ? " array)" : " arrays)") << '\n';
    else
        out << "not close (" << names_text(differ) << ")\n";
    out.flush();
    return differ.empty() ? exit_ok : exit_data_error;
}

/// A number for the JSON report: non-finite values as the protobuf JSON strings (docs/design.md §2).
nlohmann::ordered_json json_number(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
    return v;
}

/// --per-head: the rows of two weight tensors that differ most, with their KL and JS
/// divergences (core::per_head_divergence); a report, so the exit code is 0.
int compare_per_head(const compare_cli& c) {
    if (c.rtol_opt->count() || c.atol_opt->count())
        throw usage_error(c.rtol_opt->count() ? "--rtol" : "--atol",
                          "not used by --per-head, which ranks rows without a tolerance " +
                              expected_got("a tolerance or --per-head", "both"));
    const array a = c.name.empty() ? load_weights(c.a) : load(c.a, c.name);
    const array b = c.name.empty() ? load_weights(c.b) : load(c.b, c.name);
    if (a.shape != b.shape)
        throw shape_error(c.b, "shape differs from " + c.a + "'s " + expected_got(shape_string(a.shape), shape_string(b.shape)));
    if (a.rank() < 2)
        throw shape_error(c.a, "--per-head compares rows of weights " +
                                   expected_got("(…, Tq, Tk), rank 2 or more", shape_string(a.shape)));
    const std::size_t tq = a.shape[a.rank() - 2], tk = a.shape.back();
    const shape_t lead(a.shape.begin(), a.shape.end() - 2);
    const std::size_t heads = element_count(lead);
    const std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
    const std::vector<core::row_divergence> rows = core::per_head_divergence(va.data(), vb.data(), heads, tq, tk);
    const std::size_t shown = std::min(c.top, rows.size());
    const auto head_index = [&](std::size_t h) {
        std::vector<std::size_t> index(lead.size());
        for (std::size_t d = lead.size(); d-- > 0;) {
            index[d] = h % lead[d];
            h /= lead[d];
        }
        return index;
    };
    if (c.format == "json") {
        nlohmann::ordered_json j;
        j["a"] = c.a;
        j["b"] = c.b;
        j["shape"] = a.shape;
        j["rows"] = rows.size();
        nlohmann::ordered_json worst = nlohmann::ordered_json::array();
        for (std::size_t k = 0; k < shown; ++k) {
            const auto& d = rows[k];
            worst.push_back({{"head", head_index(d.head)}, {"row", d.row}, {"max_abs", json_number(d.max_abs)},
                             {"kl", json_number(d.kl)}, {"js", json_number(d.js)}});
        }
        j["worst"] = std::move(worst);
        std::cout << j.dump(2) << '\n';
    } else {
        std::cout << "per head and row of " << shape_string(a.shape) << ": the worst " << shown << " of " << rows.size()
                  << " rows (KL and JS in nats)\n";
        std::vector<std::vector<std::string>> table{{"head", "row", "max abs error", "KL(A||B)", "JS"}};
        for (std::size_t k = 0; k < shown; ++k) {
            const auto& d = rows[k];
            const auto index = head_index(d.head);
            std::string h = "(";
            for (std::size_t i = 0; i < index.size(); ++i) h += (i ? ", " : "") + std::to_string(index[i]);
            h += index.size() == 1 ? ",)" : ")";
            table.push_back({h, std::to_string(d.row), number(d.max_abs), number(d.kl), number(d.js)});
        }
        print_columns(std::cout, table, 1);
    }
    std::cout.flush();
    return exit_ok;
}

int run_compare(const compare_cli& c) {
    const std::string& spec_a = c.a;
    const std::string& spec_b = c.b;
    if (c.per_head) return compare_per_head(c);
    if (c.top_opt->count() || c.format_opt->count())
        throw usage_error(c.top_opt->count() ? "--top" : "--format",
                          "belongs to --per-head " + expected_got("--per-head", "no --per-head"));
    if (c.name.empty() && split_spec(spec_a).second.empty() && split_spec(spec_b).second.empty() && spec_a != "-" &&
        spec_b != "-") {
        // Two whole files that both hold several arrays: compare those they share, by name.
        std::vector<io::listed_array> all_a = io::list_arrays(spec_a);
        if (all_a.size() > 1) {
            std::vector<io::listed_array> all_b = io::list_arrays(spec_b);
            if (all_b.size() > 1) return compare_bundles(all_a, spec_a, all_b, spec_b, c);
        }
    }
    const array a = load(spec_a, c.name);
    const array b = load(spec_b, c.name);
    if (a.shape != b.shape)
        throw shape_error(spec_b, "shape differs from " + spec_a + "'s " +
                                      expected_got(shape_string(a.shape), shape_string(b.shape)));
    const bool close = report(std::cout, a, b, c);
    std::cout.flush();
    return close ? exit_ok : exit_data_error;
}

}  // namespace

void setup_compare(CLI::App& app, int& exit_status) {
    auto c = std::make_shared<compare_cli>();
    CLI::App* sub = app.add_subcommand(
        "compare",
        "Compare two arrays (A actual, B expected) as torch.testing.assert_close does: NaN/inf must match by "
        "position and sign, then |a - b| <= atol + rtol*|b| everywhere. Prints the max abs and rel errors, the "
        "worst index and 'close' or 'not close'. Two files that both hold several arrays (attn compute -o "
        "fast.npz and --kernel reference -o ref.npz) are compared array by array, by name; the names must agree. Exit 0 when close, 1 when not (or on a data error), 2 on a "
        "usage error.");
    sub->add_option("A", c->a, "The actual array: FILE (holding one array, or a bundle compared by name), FILE.npz:NAME or FILE.json:NAME")
        ->required();
    sub->add_option("B", c->b, "The expected array, likewise (relative errors are relative to B)")->required();
    c->rtol_opt = sub->add_option("--rtol", c->rtol,
                                  "Relative tolerance (default for the less precise dtype: float16 1e-3, float32 "
                                  "1.3e-6, float64 1e-7, integers 0)")
                      ->check(finite_number)
                      ->check(CLI::NonNegativeNumber);
    c->atol_opt = sub->add_option("--atol", c->atol,
                                  "Absolute tolerance (default: float16 1e-5, float32 1e-5, float64 1e-7, integers 0)")
                      ->check(finite_number)
                      ->check(CLI::NonNegativeNumber);
    sub->add_option("--name", c->name, "Array to take from A and B when they are bundles (.npz, JSON objects)");
    sub->add_flag("--per-head", c->per_head,
                  "Per head and query row of two weight tensors (..., Tq, Tk): max abs error, KL(A||B) and "
                  "Jensen-Shannon divergence in nats, worst rows first (by max abs error, then JS); reads "
                  "'weights' from bundles. A report: exit 0")
        ->group("Per head");
    c->top_opt = sub->add_option("--top", c->top, "With --per-head: how many rows to list")
                     ->check(CLI::Range(1, 1 << 30))
                     ->capture_default_str()
                     ->type_name("N")
                     ->group("Per head");
    c->format_opt = sub->add_option("--format", c->format, "With --per-head: table (default, aligned text) or json")
                        ->check(CLI::IsMember(io::format_names_where([](io::format f) { return f->listing; }, "table")))
                        ->group("Per head");
    add_max_bytes_option(*sub);
    sub->footer(
        "Examples:\n"
        "  attn compare w32.npy w64.npy --atol 1e-6\n"
        "  attn compare out.json:weights ref.npz:weights --per-head --top 5\n"
        "  attn compare fast.npz ref.npz    # every array the two share");
    sub->callback([c, &exit_status]() { exit_status = run_compare(*c); });
}

}  // namespace attn::cli
