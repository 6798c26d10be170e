// libFuzzer target: a batch manifest (JSON Lines) turned into jobs, the way
// `attn compute --manifest` reads one before anything runs (cli::parse_manifest), and
// every job's error made into the line attn would print (cli::printable). No job runs:
// the pipeline has targets of its own (cli, json, npy, npz, safetensors).
//
// A bad line is a job with its error set, never an exception; the checks below are the
// promises of a refused job's message: its source named once, and the printed line one
// bounded line without control characters.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cli/batch.hpp"
#include "cli/compute_options.hpp"
#include "cli/diagnostics.hpp"

namespace {

void check_printable(const std::string& text) {
    const std::string line = attn::cli::printable(text);
    for (const unsigned char c : line)
        if (c < 0x20 || c == 0x7f) __builtin_trap();
    // The cap, plus " … " and one cut word's "…" at either end.
    if (line.size() > attn::cli::max_message_bytes + 16) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    const attn::cli::compute_options base;
    const auto jobs = attn::cli::parse_manifest(text, "m.jsonl", "dir/", base);
    for (const auto& job : jobs) {
        if (job.source.rfind("m.jsonl:", 0) != 0 || job.echo.empty()) __builtin_trap();
        if (job.error.empty()) {
            // A parsed job reads its input from the manifest's folder, unless absolute or stdin;
            // a job of per-array files only (`{"q": …, "k": …, "v": …}`) has no input.
            if (!job.input.empty() && job.input != "-" && job.input[0] != '/' && job.input.rfind("dir/", 0) != 0)
                __builtin_trap();
            continue;
        }
        if (job.error.rfind(job.source + ": ", 0) != 0) __builtin_trap();
        if (job.error.rfind(job.source + ": " + job.source + ":", 0) == 0) __builtin_trap();  // named twice
        check_printable(job.error);
    }
    check_printable(text);
    return 0;
}
