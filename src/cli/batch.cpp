#include "batch.hpp"
#include "parse_errors.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>
#include <unistd.h>

#include "attn/error.hpp"
#include "attn/io/output.hpp"
#include "attn/threads.hpp"
#include "commands.hpp"
#include "cmd_plot.hpp"
#include "compute_options.hpp"
#include "output_target.hpp"

namespace attn::cli {

namespace {

/// "dir/in1.npz" → "in1"; "-" → "stdin".
std::string stem(const std::string& path) {
    if (path == "-") return "stdin";
    const auto slash = path.find_last_of('/');
    std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    const auto dot = name.find_last_of('.');
    if (dot != std::string::npos && dot > 0) name.erase(dot);
    return name;
}

const char* extension(io::format f) {
    switch (f) {
        case io::format::json: return ".json";
        case io::format::jsonl: return ".jsonl";
        case io::format::csv: return ".csv";
        case io::format::npy: return ".npy";
        case io::format::npz: return ".npz";
        case io::format::table: return ".txt";
        case io::format::html: return ".html";
    }
    return "";
}

/// The error text of a failed job, naming its input unless the message already does.
std::string job_error(const std::string& input, const std::string& what) {
    return what.rfind(input + ":", 0) == 0 ? what : input + ": " + what;
}

/// One output file per input, never two alike: each input gets its stem if no earlier
/// input took it; a repeated stem gets "-<index>" (its position among the inputs), and
/// "-2", "-3", … more while that is taken or is another input's own stem
/// (`a-2.npy a.npy a.npy` → a-2, a, a-2-2).
std::vector<std::string> output_paths(const std::vector<batch_job>& jobs, std::string dir, const std::string& ext) {
    std::set<std::string> own;  // every input's stem: reserved for its first owner
    for (const auto& job : jobs) own.insert(stem(job.input));
    std::vector<std::string> paths;
    std::set<std::string> used;
    if (!dir.empty() && dir.back() != '/') dir += '/';
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        const std::string base = stem(jobs[i].input);
        std::string name = base;
        if (used.count(name)) {
            name = base + "-" + std::to_string(i);
            for (int k = 2; used.count(name) || own.count(name); ++k)
                name = base + "-" + std::to_string(i) + "-" + std::to_string(k);
        }
        used.insert(name);
        paths.push_back(dir + name + ext);
    }
    return paths;
}

}  // namespace

namespace {

/// Options that belong to the whole run: refused in a manifest line.
bool run_wide(const std::string& key) {
    return key == "manifest" || key == "plot" || key == "jobs" || key == "j" || key == "max-bytes";
}

/// `path` taken from `dir` (the manifest's folder) unless it is absolute, stdin, or dir is "".
std::string from_dir(const std::string& dir, const std::string& path) {
    if (dir.empty() || path.empty() || path[0] == '/' || path == "-") return path;
    return dir + path;
}

/// One manifest value as option text: strings as they are, numbers as JSON writes them,
/// lists joined by commas.
std::string option_text(const nlohmann::json& v, const std::string& key) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number() || v.is_boolean()) return v.dump();
    if (v.is_array()) {
        std::string s;
        for (const auto& item : v) {
            if (item.is_array() || item.is_object() || item.is_null())
                throw value_error(key, "wrong type " + expected_got("a string, a number or a list of them", "a nested " + std::string(item.type_name())));
            s += (s.empty() ? "" : ",") + option_text(item, key);
        }
        return s;
    }
    throw value_error(key, "wrong type " + expected_got("a string, a number or a list of them", v.type_name()));
}

/// The command-line words of one manifest line, without "input" and "output".
std::vector<std::string> job_words(const nlohmann::json& line, const std::string& dir) {
    std::vector<std::string> words;
    for (const auto& [raw_key, v] : line.items()) {
        std::string key = raw_key;
        std::replace(key.begin(), key.end(), '_', '-');
        if (key == "input" || key == "output") continue;
        if (run_wide(key))
            throw usage_error(raw_key, "applies to the whole run, not to one job " +
                                           expected_got("it on the command line", "it in a manifest line"));
        if (v.is_boolean()) {
            words.push_back("--" + key + (v.get<bool>() ? "" : "=false"));
            continue;
        }
        const std::string text = option_text(v, raw_key);
        words.push_back("--" + key + "=" + (takes_file(key) ? from_dir(dir, text) : text));
    }
    return words;
}

}  // namespace

std::vector<batch_job> read_manifest(const std::string& path, const compute_options& base) {
    std::istringstream text(io::read_file(path));
    const auto slash = path.find_last_of('/');
    const std::string dir = path == "-" || slash == std::string::npos ? "" : path.substr(0, slash + 1);
    std::vector<batch_job> jobs;
    std::string line;
    for (std::size_t n = 1; std::getline(text, line); ++n) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string source = (path == "-" ? std::string("<stdin>") : path) + ":" + std::to_string(n);
        batch_job job;
        compute_options c = base;  // the same bindings as the command line, over a copy of its options
        CLI::App app;
        add_job_options(app, c);
        try {
            const auto j = nlohmann::json::parse(line);
            if (!j.is_object() || !j.contains("input") || !j["input"].is_string())
                throw value_error(source, "bad job " + expected_got("an object with \"input\": \"FILE\"", j.type_name()));
            job.input = from_dir(dir, j["input"].get<std::string>());
            if (j.contains("output")) {
                if (!j["output"].is_string())
                    throw value_error(source, "output: wrong type " + expected_got("a file name", j["output"].type_name()));
                job.output = from_dir(dir, j["output"].get<std::string>());
            }
            std::vector<std::string> words = job_words(j, dir);
            std::reverse(words.begin(), words.end());  // CLI11 takes them last to first
            app.parse(words);
            job.cli = c.pipeline;
            job.dump = c.dump;
            job.settings = pipeline_settings(c.pipeline, directory_target(c.plot) ? with_plot_stages(c.dump) : c.dump);
            job.format = c.format;
            job.style.precision = c.precision;
            job.style.compact = c.compact;
            job.style.full = c.full;
        } catch (const nlohmann::json::exception& e) {
            // Syntax, and numbers JSON cannot hold (1e999): this line fails, the others run.
            job.error = source + ": invalid JSON line (" + std::string(e.what()).substr(std::string(e.what()).find(' ') + 1) + ")";
        } catch (const CLI::ExtrasError& e) {
            std::string key = e.what();
            key = key.substr(key.find("--") + 2);
            key = key.substr(0, key.find('='));
            job.error = source + ": unknown key '" + key +
                        "' (expected input, output or a compute option such as mask, lengths, scale)";
        } catch (const CLI::ParseError& e) {
            job.error = source + ": " + parse_error_message(e, app, 0, nullptr);
        } catch (const error& e) {
            job.error = source + ": " + e.what();
        }
        if (job.input.empty()) job.input = source;
        jobs.push_back(std::move(job));
    }
    return jobs;
}

int run_batch(const std::vector<batch_job>& jobs, const batch_output& out, int workers) {
    const std::size_t n = jobs.size();
    const bool to_dir = !out.dir.empty();
    const std::vector<std::string> paths = to_dir ? output_paths(jobs, out.dir, extension(out.format)) : std::vector<std::string>{};
    const std::vector<std::string> plots = out.plot_dir.empty() ? std::vector<std::string>{} : output_paths(jobs, out.plot_dir, ".png");
    std::vector<std::optional<std::string>> records(n);  // JSON Lines text, by input order
    std::vector<std::uint8_t> failed(n, 0);
    std::mutex mutex;
    std::condition_variable ready;
    std::atomic<std::size_t> next{0};
    const bool progress = isatty(STDERR_FILENO);

    const auto work = [&] {
        // One level of parallelism, over inputs: each job's kernel and writer run on
        // this worker's thread alone (attn/threads.hpp).
        set_thread_budget(1);
        // After a terminating signal the handler is removing temporaries and exiting:
        // no worker takes another job.
        for (std::size_t i; !io::stop_requested() && (i = next.fetch_add(1)) < n;) {
            const batch_job& job = jobs[i];
            std::string record;
            std::string err = job.error;
            if (err.empty()) {
                try {
                    attn::pipeline_options settings = job.settings;
                    settings.threads = 1;  // one level of parallelism: over inputs
                    io::document doc = run_pipeline(job.input, job.cli, settings);
                    if (!plots.empty()) plot_weights(doc, plots[i], job.dump);
                    if (!job.output.empty()) {
                        // The job's own file; the batch's output gets a record saying where.
                        io::format f = io::format::json;
                        if (!job.format.empty()) f = io::parse_format(job.format);
                        else if (auto g = io::format_from_path(job.output)) f = *g;
                        io::atomic_file file(job.output);
                        io::write_document(file.stream(), doc, f, job.style, false);
                        file.commit();
                        record = nlohmann::ordered_json{{"input", job.input}, {"output", job.output}}.dump(
                                     -1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) +
                                 "\n";
                    } else if (to_dir) {
                        io::atomic_file file(paths[i]);
                        io::write_document(file.stream(), doc, out.format, out.style, false);
                        file.commit();
                    } else {
                        doc.input = job.input;
                        std::ostringstream line;
                        io::write_document(line, doc, io::format::jsonl, out.style, false);
                        record = line.str();
                    }
                } catch (const error& e) {
                    err = job_error(job.input, e.what());
                } catch (const std::bad_alloc&) {
                    err = job_error(job.input, "out of memory");
                } catch (const std::exception& e) {
                    // Nothing may escape a worker thread (std::terminate): e.g. nlohmann's
                    // type_error for a file name that is not UTF-8.
                    err = job_error(job.input, e.what());
                }
            }
            // File names need not be UTF-8: invalid bytes become U+FFFD in the record.
            if (!err.empty())
                record = nlohmann::ordered_json{{"input", job.input}, {"error", err}}.dump(
                             -1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) +
                         "\n";
            std::lock_guard<std::mutex> lock(mutex);
            if (!err.empty()) {
                failed[i] = 1;
                std::cerr << (progress ? "\r\x1b[K" : "") << "attn: error: " << err << '\n';
            }
            records[i] = std::move(record);
            ready.notify_one();
        }
    };

    std::optional<io::atomic_file> file;
    if (!to_dir && !out.file.empty() && out.file != "-" && out.file != "/dev/stdout") file.emplace(out.file);
    std::ostream& sink = file ? file->stream() : std::cout;

    std::vector<std::thread> pool;
    // At most max_batch_workers: each holds a temporary output file at a time, and the
    // signal-safe registry of temporaries has room for 256 (io/output.hpp).
    const std::size_t threads =
        std::max<std::size_t>(1, std::min<std::size_t>({static_cast<std::size_t>(workers), n, max_batch_workers}));
    for (std::size_t t = 0; t < threads; ++t) {
        try {
            pool.emplace_back(work);
        } catch (const std::system_error& e) {
            // Out of threads (EAGAIN: a process or memory limit): carry on with those we
            // have; with none, this thread does the work before it writes the records.
            std::cerr << "attn: warning: cannot start worker thread " << (t + 1) << " of " << threads << " ("
                      << std::system_category().message(e.code().value()) << "); running with "
                      << std::max<std::size_t>(pool.size(), 1) << '\n';
            break;
        }
    }
    if (pool.empty()) work();
    // The calling thread writes records in input order as they become ready.
    for (std::size_t i = 0; i < n; ++i) {
        std::unique_lock<std::mutex> lock(mutex);
        ready.wait(lock, [&] { return records[i].has_value(); });
        std::string record = std::move(*records[i]);
        records[i].reset();
        if (progress) std::cerr << "\rattn: " << (i + 1) << "/" << n << std::flush;
        lock.unlock();
        if (!to_dir) sink << record;
    }
    for (auto& t : pool) t.join();
    if (progress) std::cerr << "\r\x1b[K" << std::flush;
    sink.flush();
    if (!sink) throw io_error(out.file.empty() ? "<stdout>" : out.file, "write failed");
    if (file) file->commit();
    for (auto f : failed)
        if (f) return exit_data_error;
    return exit_ok;
}

}  // namespace attn::cli
