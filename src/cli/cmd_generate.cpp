// attn generate: seeded standard-normal inputs for demos, tests and benchmarks.
#include <iostream>
#include <memory>
#include <unistd.h>

#include "attn/io/formats.hpp"
#include "attn/core/generate.hpp"
#include "attn/error.hpp"
#include "attn/io/writers.hpp"
#include "attn/io/json.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "attn/io/output.hpp"
#include "commands.hpp"
#include "output_target.hpp"

namespace attn::cli {

namespace {

struct generate_cli {
    core::generate_options gen;
    std::string dtype = "float32";
    std::string format;
    std::string output;
};

/// "npz", "npy" or "json": --format, else -o's extension, else json (stdout).
std::string output_format(const generate_cli& c) {
    if (!c.format.empty()) return c.format;
    if (is_stdout(c.output)) return "json";
    if (const io::format f = io::format_from_path(c.output))
        if (f->name == "npz" || f->name == "npy" || f->name == "json") return f->name;
    const std::size_t dot = c.output.rfind('.');
    const std::string ext = dot == std::string::npos || c.output.find('/', dot) != std::string::npos ? "" : c.output.substr(dot);
    throw usage_error("-o", "cannot tell the format from the extension " +
                                expected_got(".npz, .npy, .json or --format", ext.empty() ? "none" : "'" + ext + "'"));
}

void write(std::ostream& out, const std::vector<io::named_array>& arrays, const std::string& format,
           const generate_cli& c) {
    if (format == "npz") {
        io::write_npz(out, arrays);
    } else if (format == "npy") {
        io::write_npy(out, arrays.front().value);
    } else {
        io::document doc;
        doc.meta["attn_version"] = ATTN_VERSION;
        doc.meta["generator"] = "mt19937_64, Marsaglia polar method";
        doc.meta["seed"] = c.gen.seed;
        doc.meta["dtype"] = c.dtype;
        doc.tensors = arrays;
        io::write_json(out, doc, io::text_style{});
    }
}

int run_generate(generate_cli& c) {
    c.gen.type = c.dtype == "float64" ? dtype::f8 : dtype::f4;
    const std::string format = output_format(c);
    const std::vector<io::named_array> arrays = core::generate_inputs(c.gen);
    if (format == "npy" && (arrays.size() != 1 || arrays.front().name != "x")) {
        std::string names;
        for (const auto& a : arrays) names += (names.empty() ? "" : ", ") + a.name;
        throw usage_error("--format", "npy holds one array, X " +
                                          expected_got("--embed E without --weights or --len-kv", names));
    }
    write_output(c.output, format != "json", [&](std::ostream& out) { write(out, arrays, format, c); });
    return exit_ok;
}

}  // namespace

void setup_generate(CLI::App& app, int& exit_status) {
    auto c = std::make_shared<generate_cli>();
    CLI::App* sub = app.add_subcommand(
        "generate",
        "Random inputs for demos and benchmarks: standard normal, seeded (mt19937_64 + Marsaglia polar, the same "
        "bytes for the same seed). Without --embed: q (L, Dk), k (S, Dk), v (S, Dv), (B, L, D) with --batch, "
        "(B, H, L, D) with --heads. With --embed E: x (L, E) (and x_kv (S, E) when S != L), plus w_q, w_k, w_v "
        "(H*Dk, E) ~ N(0, 1/E) with --weights.");
    const auto sizes = CLI::Range(std::size_t{1}, std::size_t{1} << 24);
    sub->add_option("--len", c->gen.len, "L: query length")->required()->check(sizes);
    sub->add_option("--len-kv", c->gen.len_kv, "S: key/value length (default L)")->check(sizes);
    sub->add_option("--dk", c->gen.dk, "Head width of q and k (required without --embed; default E/H with --weights)")
        ->check(sizes);
    sub->add_option("--dv", c->gen.dv, "Head width of v (default Dk)")->check(sizes);
    sub->add_option("--batch", c->gen.batch, "B: add a batch axis of this size")->check(sizes);
    sub->add_option("--heads", c->gen.heads, "H: heads (q, k, v become (B, H, T, D); with --weights, H*Dk rows)")
        ->check(sizes);
    sub->add_option("--embed", c->gen.embed, "E: generate embeddings x (and x_kv) instead of q, k, v")->check(sizes);
    sub->add_flag("--weights", c->gen.weights, "With --embed: also projection weights w_q, w_k, w_v (out, in)");
    sub->add_option("--seed", c->gen.seed, "Seed of the mt19937_64 generator (0 to 2^64 - 1)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    sub->add_option("--dtype", c->dtype, "Element type")
        ->check(CLI::IsMember({"float32", "float64"}))
        ->capture_default_str();
    sub->add_option("--format", c->format, "npz, npy (X only: needs --embed) or json; default from -o's extension")
        ->check(CLI::IsMember(io::format_names_where([](io::format f) { return f->readable; }, "json")));
    sub->add_option("-o,--output", c->output, "Write to FILE (atomically) instead of stdout");
    sub->footer(
        "Examples:\n"
        "  attn generate --len 4 --dk 8 --dv 8 --seed 0 -o in.npz\n"
        "  attn generate --len 6 --embed 16 --heads 4 --weights -o mha.npz\n"
        "  attn generate --len 3 --len-kv 5 --dk 4 --dv 4 --heads 2 -o cross.npz");
    sub->callback([c, &exit_status]() { exit_status = run_generate(*c); });
}

}  // namespace attn::cli
