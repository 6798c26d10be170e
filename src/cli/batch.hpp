#pragma once
// Batch runs of `attn compute` (DESIGN §2 "Batch runs"): several inputs or a manifest,
// run by N workers, written in input order.

#include <string>
#include <vector>

#include "attn/core/pipeline.hpp"
#include "attn/io/writers.hpp"
#include "pipeline_options.hpp"

namespace attn::cli {

struct batch_job {
    std::string input;
    core::pipeline_options settings;
    std::string error;  // set when the job could not even be read from the manifest
};

/// Where batch results go: JSON Lines on stdout or into one file (`file`), or one file
/// per input under `dir` in `format`.
struct batch_output {
    io::format format = io::format::jsonl;
    io::text_style style;
    std::string file;
    std::string dir;
};

/// Reads a manifest (JSON Lines; "-" is stdin): one job per non-blank line, `input`
/// plus compute options overriding `base`. A bad line becomes a job with `error` set.
/// Throws io_error if the manifest cannot be read.
std::vector<batch_job> read_manifest(const std::string& path, const core::pipeline_options& base);

/// The most worker threads a batch runs, whatever -j says.
constexpr std::size_t max_batch_workers = 200;

/// Runs the jobs on `workers` threads (at most max_batch_workers; one kernel thread
/// each); every job fails on its own: one stderr line and an {"input", "error"} record.
/// A worker thread that cannot be created is reported by one warning line and the jobs
/// run on the threads there are. Returns 1 if any job failed.
int run_batch(const std::vector<batch_job>& jobs, const pipeline_cli& cli, const batch_output& out, int workers);

}  // namespace attn::cli
