// attn compare: are two arrays close, as torch.testing.assert_close judges it?
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sys/stat.h>

#include "attn/core/compare.hpp"
#include "attn/error.hpp"
#include "attn/text.hpp"
#include "attn/io/input.hpp"
#include "attn/io/listing.hpp"
#include "attn/io/npy.hpp"
#include "commands.hpp"
#include "pipeline_options.hpp"

namespace attn::cli {

namespace {

struct compare_cli {
    std::string a, b;  // actual, expected: FILE or FILE:NAME
    double rtol = 0, atol = 0;
    std::string name;
    CLI::Option* rtol_opt = nullptr;
    CLI::Option* atol_opt = nullptr;
};

bool exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

/// FILE:NAME split as io::load_array splits it (a path that exists is never split).
std::pair<std::string, std::string> split_spec(const std::string& spec) {
    const std::size_t colon = spec.rfind(':');
    if (!exists(spec) && colon != std::string::npos && colon > 0 && colon + 1 < spec.size() &&
        spec.find('/', colon) == std::string::npos)
        return {spec.substr(0, colon), spec.substr(colon + 1)};
    return {spec, ""};
}

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

std::string index_text(const shape_t& index) {
    std::string s = "(";
    for (std::size_t i = 0; i < index.size(); ++i) s += (i ? ", " : "") + std::to_string(index[i]);
    return s + (index.size() == 1 ? ",)" : ")");
}

int run_compare(const compare_cli& c) {
    const std::string& spec_a = c.a;
    const std::string& spec_b = c.b;
    const array a = load(spec_a, c.name);
    const array b = load(spec_b, c.name);
    if (a.shape != b.shape)
        throw shape_error(spec_b, "shape differs from " + spec_a + "'s " +
                                      expected_got(shape_string(a.shape), shape_string(b.shape)));
    core::tolerance tol = core::default_tolerance(a.type, b.type);
    if (c.rtol_opt->count()) tol.rtol = c.rtol;
    if (c.atol_opt->count()) tol.atol = c.atol;
    const core::compare_result r = core::compare(a, b, tol.rtol, tol.atol);

    std::ostream& out = std::cout;
    out << "dtypes: " << dtype_name(a.type) << ", " << dtype_name(b.type) << "; shape " << shape_string(a.shape) << '\n';
    out << "tolerance: rtol " << number(tol.rtol) << ", atol " << number(tol.atol) << '\n';
    if (r.nonfinite_mismatched)
        out << "NaN/inf mismatch: " << r.nonfinite_mismatched << (r.nonfinite_mismatched == 1 ? " position" : " positions")
            << ", first at " << index_text(r.worst_index) << '\n';
    out << "max abs error: " << number(r.max_abs_error) << '\n';
    out << "max rel error: " << number(r.max_rel_error) << '\n';
    if (r.count > 0)
        out << "worst index: " << index_text(r.worst_index) << " (a = " << number(r.worst_a) << ", b = "
            << number(r.worst_b) << ")\n";
    out << "mismatched: " << r.mismatched << " of " << r.count << '\n';
    out << (r.close ? "close" : "not close") << '\n';
    out.flush();
    return r.close ? exit_ok : exit_data_error;
}

}  // namespace

void setup_compare(CLI::App& app, int& exit_status) {
    auto c = std::make_shared<compare_cli>();
    CLI::App* sub = app.add_subcommand(
        "compare",
        "Compare two arrays (A actual, B expected) as torch.testing.assert_close does: NaN/inf must match by "
        "position and sign, then |a - b| <= atol + rtol*|b| everywhere. Prints the max abs and rel errors, the "
        "worst index and 'close' or 'not close'. Exit 0 when close, 1 when not (or on a data error), 2 on a "
        "usage error.");
    sub->add_option("A", c->a, "The actual array: FILE (holding one array), FILE.npz:NAME or FILE.json:NAME")
        ->required();
    sub->add_option("B", c->b, "The expected array, likewise (relative errors are relative to B)")->required();
    c->rtol_opt = sub->add_option("--rtol", c->rtol,
                                  "Relative tolerance (default for the less precise dtype: float16 1e-3, float32 "
                                  "1.3e-6, float64 1e-7, integers 0)")
                      ->check(CLI::NonNegativeNumber);
    c->atol_opt = sub->add_option("--atol", c->atol,
                                  "Absolute tolerance (default: float16 1e-5, float32 1e-5, float64 1e-7, integers 0)")
                      ->check(CLI::NonNegativeNumber);
    sub->add_option("--name", c->name, "Array to take from A and B when they are bundles (.npz, JSON objects)");
    add_max_bytes_option(*sub);
    sub->callback([c, &exit_status]() { exit_status = run_compare(*c); });
}

}  // namespace attn::cli
