// attn._attn: the C extension under the Python package attn (python/attn/__init__.py,
// docs/python.md). A thin binding: the keyword arguments of attn.compute arrive here as
// the words of a command line and go through the CLI's own option table and parser
// (src/cli/option_table.cpp, add_job_options), so that names, defaults, validation and
// messages are the CLI's; the arrays arrive as NumPy buffers and reach the pipeline as
// views (attn::byte_buffer::view), without a copy; the result is the io::document the
// CLI would write, whose tensors NumPy sees in place.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/io/formats.hpp"
#include "attn/io/input.hpp"
#include "attn/io/limits.hpp"
#include "attn/io/output.hpp"
#include "attn/io/writers.hpp"
#include "attn/pipeline.hpp"
#include "attn/pipeline/text.hpp"
#include "attn/tensor.hpp"
#include "attn/tokenizer/tokenizer.hpp"
#include "commands.hpp"
#include "compute_options.hpp"
#include "diagnostics.hpp"
#include "flag_terms.hpp"
#include "option_table.hpp"
#include "parse_errors.hpp"
#include "pipeline_cli.hpp"

namespace py = pybind11;

namespace {

// ---------------------------------------------------------------------------------------
// Errors: attn's typed errors become the classes of attn/errors.py, with the CLI's line.

/// The one line the CLI prints after "attn: error: " for `what` (print_error's text).
std::string cli_line(const std::string& what) { return attn::cli::printable(attn::cli::in_flag_terms(what)); }

/// Raises attn.errors.<cls>(line, source=..., detail=...) as the current Python error.
void raise_as(const char* cls, const std::string& line, const std::string& source, const std::string& detail) {
    py::object errors = py::module_::import("attn.errors");
    py::object type = errors.attr(cls);
    py::object value = type(line, py::arg("source") = source, py::arg("detail") = detail);
    PyErr_SetObject(type.ptr(), value.ptr());
}

void translate(std::exception_ptr p) {
    try {
        if (p) std::rethrow_exception(p);
    } catch (const attn::usage_error& e) {
        raise_as("UsageError", cli_line(e.what()), e.source(), e.message());
    } catch (const attn::limit_error& e) {
        raise_as("LimitError", cli_line(e.what()), e.source(), e.message());
    } catch (const attn::io_error& e) {
        raise_as("FileError", cli_line(e.what()), e.source(), e.message());
    } catch (const attn::format_error& e) {
        raise_as("FormatError", cli_line(e.what()), e.source(), e.message());
    } catch (const attn::shape_error& e) {
        raise_as("ShapeError", cli_line(e.what()), e.source(), e.message());
    } catch (const attn::value_error& e) {
        raise_as("DataError", cli_line(e.what()), e.source(), e.message());
    } catch (const attn::error& e) {
        raise_as("DataError", cli_line(e.what()), e.source(), e.message());
    } catch (const CLI::ParseError& e) {
        raise_as("UsageError", cli_line(e.what()), "", e.what());
    }
    // Anything else (std::bad_alloc → MemoryError, std::exception → RuntimeError):
    // pybind11's own translators, next in line.
}

// ---------------------------------------------------------------------------------------
// Arrays: NumPy ↔ attn::array.

/// The attn dtype of a NumPy array (native byte order, C-contiguous: the Python side
/// makes it so, copying only when it is not). Throws value_error for another dtype.
attn::dtype dtype_of(const py::array& a, const std::string& name) {
    const py::dtype d = a.dtype();
    const char kind = d.kind();
    const auto size = d.itemsize();
    if (kind == 'b' && size == 1) return attn::dtype::b1;
    if (kind == 'f' && size == 2) return attn::dtype::f2;
    if (kind == 'f' && size == 4) return attn::dtype::f4;
    if (kind == 'f' && size == 8) return attn::dtype::f8;
    if (kind == 'i' && size == 1) return attn::dtype::i1;
    if (kind == 'i' && size == 2) return attn::dtype::i2;
    if (kind == 'i' && size == 4) return attn::dtype::i4;
    if (kind == 'i' && size == 8) return attn::dtype::i8;
    if (kind == 'u' && size == 1) return attn::dtype::u1;
    if (kind == 'u' && size == 2) return attn::dtype::u2;
    if (kind == 'u' && size == 4) return attn::dtype::u4;
    if (kind == 'u' && size == 8) return attn::dtype::u8;
    throw attn::value_error(name, "unsupported dtype " +
                                      attn::expected_got("bool, int8-64, uint8-64, float16, float32 or float64",
                                                         py::repr(py::reinterpret_borrow<py::object>(d)).cast<std::string>()));
}

/// The NumPy format character of an attn dtype.
std::string numpy_format(attn::dtype t) {
    switch (t) {
        case attn::dtype::b1: return "?";
        case attn::dtype::i1: return "b";
        case attn::dtype::i2: return "h";
        case attn::dtype::i4: return "i";
        case attn::dtype::i8: return "q";
        case attn::dtype::u1: return "B";
        case attn::dtype::u2: return "H";
        case attn::dtype::u4: return "I";
        case attn::dtype::u8: return "Q";
        case attn::dtype::f2: return "e";
        case attn::dtype::f4: return "f";
        case attn::dtype::f8: return "d";
    }
    return "d";
}

/// A view of NumPy array `a` (C-contiguous, native order) as an attn::array. The view keeps
/// a reference to `a`, released with the GIL held whichever thread drops it last.
attn::array view_of(const py::array& a, const std::string& name) {
    if (!(a.flags() & py::array::c_style))
        throw attn::value_error(name, "not C-contiguous (expected numpy.ascontiguousarray, got strides)");
    attn::array out;
    out.type = dtype_of(a, name);
    out.shape.assign(a.shape(), a.shape() + a.ndim());
    PyObject* ref = a.ptr();
    Py_INCREF(ref);
    std::shared_ptr<const void> owner(ref, [](const void* p) {
        py::gil_scoped_acquire gil;
        Py_DECREF(static_cast<PyObject*>(const_cast<void*>(p)));
    });
    const std::size_t bytes = attn::element_count(out.shape) * attn::dtype_size(out.type);
    out.data = attn::byte_buffer::view(std::move(owner), static_cast<const std::byte*>(a.data()), bytes);
    return out;
}

// ---------------------------------------------------------------------------------------
// The result: the document the CLI writes, held by Python.

struct result_doc {
    attn::io::document doc;
};

/// Tensor `i` of `r` as a read-only NumPy array over the document's bytes (no copy); the
/// array keeps the document alive.
py::array tensor_array(const std::shared_ptr<result_doc>& r, std::size_t i) {
    const attn::named_array& t = r->doc.tensors.at(i);
    const attn::array& a = t.value;
    std::vector<py::ssize_t> shape(a.shape.begin(), a.shape.end());
    const py::dtype dt(numpy_format(a.type));
    std::vector<py::ssize_t> strides(shape.size());
    py::ssize_t step = static_cast<py::ssize_t>(attn::dtype_size(a.type));
    for (std::size_t k = shape.size(); k-- > 0;) {
        strides[k] = step;
        step *= shape[k];
    }
    auto* keep = new std::shared_ptr<result_doc>(r);
    py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<result_doc>*>(p); });
    py::array out(dt, shape, strides, static_cast<const void*>(a.data.data()), base);
    py::detail::array_proxy(out.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
    return out;
}

/// Writes `r` to `path` as `attn compute -o path [--format format]` writes it.
void write_result(const result_doc& r, const std::string& path, const std::string& format) {
    const attn::io::format f = format.empty() ? attn::io::format_from_path(path) : attn::io::parse_format(format);
    if (!f) throw attn::usage_error("--format", "no format for " + attn::expected_got("a known extension or format", path));
    attn::io::atomic_file file(path);
    attn::io::write_document(file.stream(), r.doc, f, attn::io::text_style{}, false);
    file.commit();
}

// ---------------------------------------------------------------------------------------
// Running a job off the interpreter's thread, so that Ctrl-C reaches Python.

/// One job run on a thread of its own: the caller waits with the GIL released, checking
/// for signals every 50 ms; on KeyboardInterrupt it returns at once and the job, which
/// has no way to stop midway, finishes unseen (wait_abandoned, at exit, waits for it).
struct job {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::exception_ptr error;
    std::shared_ptr<result_doc> result;
};

std::mutex abandoned_m;
std::vector<std::shared_ptr<job>> abandoned;

template <class Work>
std::shared_ptr<result_doc> run_interruptible(Work work) {
    auto j = std::make_shared<job>();
    bool throw_interrupt = false;
    {
        py::gil_scoped_release nogil;
        std::thread t([j, work = std::move(work)]() mutable {
            std::shared_ptr<result_doc> r;
            std::exception_ptr e;
            try {
                r = work();
            } catch (...) {
                e = std::current_exception();
            }
            // The work's inputs (NumPy views) are released inside work(): nothing here
            // needs the GIL.
            std::lock_guard<std::mutex> lock(j->m);
            j->result = std::move(r);
            j->error = e;
            j->done = true;
            j->cv.notify_all();
        });
        t.detach();
        std::unique_lock<std::mutex> lock(j->m);
        bool interrupted = false;
        while (!interrupted && !j->cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return j->done; })) {
            lock.unlock();
            {
                py::gil_scoped_acquire gil;
                interrupted = PyErr_CheckSignals() != 0;
                if (interrupted) {
                    std::lock_guard<std::mutex> a(abandoned_m);
                    abandoned.push_back(j);
                }
            }
            lock.lock();
        }
        if (interrupted) {
            lock.unlock();
            throw_interrupt = true;
        }
    }
    // Back with the GIL: a KeyboardInterrupt (set by PyErr_CheckSignals) goes up as is.
    if (throw_interrupt) throw py::error_already_set();
    if (j->error) std::rethrow_exception(j->error);
    return j->result;
}

/// Waits for the jobs a KeyboardInterrupt left running (registered with atexit by
/// attn/__init__.py): their NumPy inputs must be released before the interpreter ends.
void wait_abandoned() {
    std::vector<std::shared_ptr<job>> jobs;
    {
        std::lock_guard<std::mutex> a(abandoned_m);
        jobs.swap(abandoned);
    }
    py::gil_scoped_release nogil;
    for (auto& j : jobs) {
        std::unique_lock<std::mutex> lock(j->m);
        j->cv.wait(lock, [&] { return j->done; });
    }
}

std::size_t running_abandoned() {
    std::lock_guard<std::mutex> a(abandoned_m);
    return static_cast<std::size_t>(std::count_if(abandoned.begin(), abandoned.end(), [](const std::shared_ptr<job>& j) {
        std::lock_guard<std::mutex> lock(j->m);
        return !j->done;
    }));
}

// ---------------------------------------------------------------------------------------
// attn compute in process.

/// Parses `words` (as a manifest line's: "--mask=causal", …) with compute's job and run
/// options into `c`. Throws usage_error with the CLI's message.
void parse_compute_words(attn::cli::compute_options& c, const std::vector<std::string>& given) {
    // As `attn compute WORDS`: the subcommand of an app, which parse_error_message reads
    // ("unknown option --maks (did you mean --mask?)", "see attn compute --help").
    CLI::App app{"attn", "attn"};
    app.require_subcommand(1);
    CLI::App* sub = app.add_subcommand("compute");
    attn::cli::add_job_options(*sub, c);
    attn::cli::add_run_options(*sub, c.pipeline);
    std::vector<std::string> words{"compute"};
    for (const auto& w : attn::cli::split_empty_values(given)) words.push_back(w);
    std::vector<const char*> argv{"attn"};
    for (const auto& w : words) argv.push_back(w.c_str());
    try {
        std::vector<std::string> reversed(words.rbegin(), words.rend());  // CLI11 takes them last first
        app.parse(reversed);
    } catch (const CLI::ParseError& e) {
        throw attn::usage_error("", attn::cli::parse_error_message(e, app, static_cast<int>(argv.size()), argv.data()));
    }
}

/// Puts `extra` into `arrays`, replacing an array of the same name (an option's array
/// replaces a bundle's, as on the command line).
void merge_arrays(std::vector<attn::named_array>& arrays, std::vector<attn::named_array> extra) {
    for (auto& e : extra) {
        auto it = std::find_if(arrays.begin(), arrays.end(), [&](const attn::named_array& n) { return n.name == e.name; });
        if (it != arrays.end()) it->value = std::move(e.value);
        else arrays.push_back(std::move(e));
    }
}

/// The file an error about an array came from (cmd_compute.cpp's file_of_array, which the
/// CLI's messages use): the array's own option file, or else the INPUT; "" when the message
/// is an option's own, names no array, or names its file already. An array given from
/// Python has no file: its name alone says where.
std::string file_of_array(const std::string& what, const attn::cli::compute_options& c,
                          const std::vector<std::string>& from_python) {
    const std::size_t colon = what.find(": ");
    if (what.empty() || what[0] == '-' || what[0] == '`' || colon == std::string::npos) return "";
    const std::string name = what.substr(0, colon);
    if (std::find(from_python.begin(), from_python.end(), name) != from_python.end()) return "";
    if (const auto it = c.pipeline.tensor_files.find(name); it != c.pipeline.tensor_files.end()) return it->second;
    if (c.inputs.empty() || name == "inputs") return "";
    const std::string input = c.inputs.front() == "-" ? "<stdin>" : c.inputs.front();
    return what.rfind(input + ":", 0) == 0 ? "" : input;
}

/// The document of one compute call (run_compute's single-input path, without the writing).
std::shared_ptr<result_doc> compute_job(const std::string& input, std::vector<attn::named_array> bundle_arrays,
                                        std::vector<std::string> bundle_tokens, std::vector<attn::named_array> option_arrays,
                                        const std::vector<std::string>& words, bool state_dict) {
    namespace cli = attn::cli;
    const std::size_t limit = attn::io::max_array_bytes();
    struct restore_limit {
        std::size_t bytes;
        ~restore_limit() { attn::io::set_max_array_bytes(bytes); }
    } restore{limit};  // --max-bytes (max_bytes=) holds for this call only
    cli::compute_options c;
    parse_compute_words(c, words);
    if (!input.empty()) c.inputs = {input};
    if (!c.inputs.empty()) c.pipeline = cli::with_every_layer(c.pipeline, c.inputs);
    const attn::pipeline_options settings = cli::pipeline_settings(c.pipeline, c.dump);
    auto r = std::make_shared<result_doc>();
    if (cli::checkpoint_run(c.pipeline)) {
        const attn::checkpoint_options ck = cli::checkpoint_settings(input, c.pipeline);
        attn::io::bundle extra = cli::gather_inputs("", c.pipeline);
        merge_arrays(extra.arrays, std::move(bundle_arrays));
        merge_arrays(extra.arrays, std::move(option_arrays));
        // As run_compute: an array from --x FILE or --token-ids FILE (x="file.npy") is
        // named with its file; the checkpoint's own messages name it already.
        const auto file_of = [&](const std::string& what) {
            const auto it = c.pipeline.tensor_files.find(what.substr(0, what.find(": ")));
            return it == c.pipeline.tensor_files.end() ? std::string() : it->second;
        };
        try {
            r->doc = attn::compute_checkpoint(ck, std::move(extra.arrays), {}, settings);
        } catch (const attn::limit_error&) {
            throw;
        } catch (const attn::shape_error& e) {
            if (file_of(e.what()).empty()) throw;
            throw attn::shape_error(file_of(e.what()), e.what());
        } catch (const attn::value_error& e) {
            if (file_of(e.what()).empty()) throw;
            throw attn::value_error(file_of(e.what()), e.what());
        }
    } else {
        attn::io::bundle b = cli::gather_inputs(input, c.pipeline);
        std::vector<std::string> given;  // the arrays Python gave, which have no file
        for (const auto& a : bundle_arrays) given.push_back(a.name);
        for (const auto& a : option_arrays) given.push_back(a.name);
        if (state_dict) {
            // As gather_inputs refuses a state_dict file (pipeline_cli.cpp): nn.MultiheadAttention's
            // state dict records neither num_heads nor batch_first.
            if (c.pipeline.settings.heads == 0)
                throw attn::usage_error("--heads", "nn.MultiheadAttention's state dict does not record num_heads " +
                                                       attn::expected_got("--heads N", "no --heads"));
            for (const auto& a : bundle_arrays)
                if (a.name == "x" && a.value.rank() == 3 && !c.pipeline.settings.seq_first && c.pipeline.layout.empty() &&
                    !c.pipeline.batch_first)
                    throw attn::usage_error("--seq-first", "nn.MultiheadAttention's state dict does not record batch_first " +
                                                               attn::expected_got("--seq-first for (T, B, E), its default, or --batch-first for (B, T, E)",
                                                                                  "x " + attn::shape_string(a.value.shape) + " and neither"));
        }
        merge_arrays(b.arrays, std::move(bundle_arrays));
        merge_arrays(b.arrays, std::move(option_arrays));
        if (!bundle_tokens.empty()) b.tokens = std::move(bundle_tokens);
        if (b.arrays.empty() && !input.empty()) {
            if (attn::io::is_checkpoint_file(input))
                throw attn::value_error(input, "a checkpoint of " + std::to_string(b.ignored.size()) +
                                                   " tensors, none an attention input (expected --layer N or --layer all to "
                                                   "compute a model's layer, or tensors named q, k, v or x)");
            throw attn::value_error(input, "no input arrays (expected q, k, v or x; found " +
                                               (b.ignored.empty() ? std::string("none") : cli::name_list(b.ignored)) + ")");
        }
        if (b.arrays.empty())
            throw attn::usage_error("attn.compute", "no input " + attn::expected_got("input= or q=/k=/v=/x=", "none"));
        try {
            r->doc = attn::compute(std::move(b.arrays), b.tokens, settings);
        } catch (const attn::limit_error&) {
            throw;  // names its file already
        } catch (const attn::shape_error& e) {
            // As run_compute: an array's error names its file too ("in.npz: v: …").
            const std::string file = file_of_array(e.what(), c, given);
            if (file.empty()) throw;
            throw attn::shape_error(file, e.what());
        } catch (const attn::value_error& e) {
            const std::string file = file_of_array(e.what(), c, given);
            if (file.empty()) throw;
            throw attn::value_error(file, e.what());
        }
    }
    cli::apply_store(r->doc, c.store, attn::io::parse_format("npz"));
    return r;
}

/// attn.compute's entry: `input` a path or ""; `bundle` the arrays of an input dict (names
/// read as a bundle's: lower case, state_dict names made attn's, unknown names ignored
/// with a warning, a lone array of another name is x); `arrays` the arrays of keyword
/// arguments, by attn name; `words` the other keywords as command-line words.
std::shared_ptr<result_doc> py_compute(const std::string& input, const std::vector<std::pair<std::string, py::array>>& bundle,
                                       const std::vector<std::string>& bundle_tokens,
                                       const std::vector<std::pair<std::string, py::array>>& arrays,
                                       const std::vector<std::string>& words) {
    std::vector<attn::named_array> bundle_arrays, option_arrays;
    std::vector<std::string> ignored;
    bool state_dict = false;
    for (const auto& [raw, a] : bundle) {
        std::string name = raw;
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
        state_dict = state_dict || name == "in_proj_weight" || name == "q_proj_weight" || name == "k_proj_weight" ||
                     name == "v_proj_weight";
        name = attn::io::canonical_name(name);
        if (!attn::io::is_attn_name(name) && bundle.size() > 1) {
            ignored.push_back(raw);
            continue;
        }
        if (!attn::io::is_attn_name(name)) name = "x";  // a lone array is X, as a lone .npz member
        if (std::any_of(bundle_arrays.begin(), bundle_arrays.end(), [&](const attn::named_array& n) { return n.name == name; }))
            throw attn::format_error("input", "two arrays named " + name + " " + attn::expected_got("one", "two, ignoring case"));
        bundle_arrays.push_back({name, view_of(a, name)});
    }
    if (!ignored.empty())
        attn::cli::print_warning("input: ignored arrays " + attn::cli::name_list(ignored) +
                                 " (not an input name; see attn compute --help)");
    for (const auto& [name, a] : arrays) option_arrays.push_back({name, view_of(a, name)});
    return run_interruptible([input, bundle_arrays = std::move(bundle_arrays), bundle_tokens,
                              option_arrays = std::move(option_arrays), words, state_dict]() mutable {
        return compute_job(input, std::move(bundle_arrays), bundle_tokens, std::move(option_arrays), words, state_dict);
    });
}

// ---------------------------------------------------------------------------------------
// The other subcommands, in process: attn view, plot, tokenize, … as on the command line.

/// Runs `attn WORDS...` in this process, as attn's main does but without its process-wide
/// handlers (signals, memory): the subcommand's callback writes its files. Returns the
/// exit status; throws attn errors (a parse error as usage_error) instead of printing them.
int run_cli(const std::vector<std::string>& given) {
    namespace cli = attn::cli;
    CLI::App app{"attn", "attn"};
    app.require_subcommand(1);
    int status = cli::exit_ok;
    cli::setup_compute(app, status);
    cli::setup_generate(app, status);
    cli::setup_posenc(app, status);
    cli::setup_inspect(app, status);
    cli::setup_compare(app, status);
    cli::setup_plot(app, status);
    cli::setup_rope(app, status);
    cli::setup_rollout(app, status);
    cli::setup_view(app, status);
    cli::setup_tokenize(app, status);
    const std::vector<std::string> words = cli::split_empty_values(given);
    app.parse_complete_callback([&app, &words] { cli::refuse_repeated_lists(app, words); });
    const std::size_t limit = attn::io::max_array_bytes();
    struct restore_limit {
        std::size_t bytes;
        ~restore_limit() { attn::io::set_max_array_bytes(bytes); }
    } restore{limit};
    std::vector<const char*> argv{"attn"};
    for (const auto& w : given) argv.push_back(w.c_str());
    try {
        std::vector<std::string> reversed(words.rbegin(), words.rend());
        app.parse(reversed);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return 0;
        throw attn::usage_error("", cli::parse_error_message(e, app, static_cast<int>(argv.size()), argv.data()));
    }
    return status;
}

// ---------------------------------------------------------------------------------------
// The option table, for the Python keyword list.

/// Every option attn.compute can take: compute's job and run options as CLI11 holds them
/// (names, flag or value, default) with the table's row (scope, file, choices, help).
py::list compute_options_list() {
    namespace cli = attn::cli;
    cli::compute_options c;
    CLI::App app{"attn compute", "attn"};
    cli::add_job_options(app, c);
    cli::add_run_options(app, c.pipeline);
    py::list out;
    for (const CLI::Option* o : app.get_options()) {
        if (o->get_lnames().empty()) continue;  // --help has one; nothing without a long name
        const std::string flag = "--" + o->get_lnames().front();
        py::dict d;
        d["flag"] = flag;
        d["flag_only"] = o->get_expected_min() == 0;
        d["default"] = o->get_default_str();
        d["help"] = o->get_description();
        d["group"] = o->get_group();
        d["type_name"] = o->get_type_name();
        d["takes_list"] = o->get_expected_max() > 1 || o->get_items_expected_max() > 1;
        std::string scope = "run";
        bool file = false;
        py::list choices;
        for (const cli::option_row& r : cli::option_table()) {
            const std::string row_long = r.flag.substr(r.flag.rfind("--"));
            if (row_long != flag) continue;
            switch (r.scope) {
                case cli::option_scope::pipeline: scope = "pipeline"; break;
                case cli::option_scope::rope: scope = "rope"; break;
                case cli::option_scope::job: scope = "job"; break;
                case cli::option_scope::run: scope = "run"; break;
                case cli::option_scope::output: scope = "output"; break;
                case cli::option_scope::other: scope = "other"; break;
            }
            file = r.file;
            for (const auto& ch : r.choices) choices.append(ch);
        }
        d["scope"] = scope;
        d["file"] = file;
        d["choices"] = choices;
        out.append(d);
    }
    return out;
}

/// io::input_kinds(): (name, flag, with_checkpoint) of every input array.
py::list input_kinds_list() {
    py::list out;
    for (const attn::io::input_kind& k : attn::io::input_kinds())
        out.append(py::make_tuple(std::string(k.name), std::string(k.flag), k.with_checkpoint));
    return out;
}

// ---------------------------------------------------------------------------------------
// attn tokenize.

py::list py_tokenize(const std::vector<std::string>& texts, std::string path, bool special_tokens) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) path = (std::filesystem::path(path) / "tokenizer.json").string();
    const auto tok = attn::load_tokenizer(path);
    py::list out;
    for (std::size_t i = 0; i < texts.size(); ++i) {
        attn::tokenizer::encoding e;
        try {
            e = tok.encode(texts[i], special_tokens);
        } catch (const attn::value_error& err) {
            if (err.source() != "text") throw;
            throw attn::value_error("text " + std::to_string(i), err.message());
        }
        py::dict d;
        d["text"] = texts[i];
        d["ids"] = e.ids;
        // Tokens and labels of byte-level pieces may hold bytes that are not UTF-8 alone.
        py::list tokens, labels, offsets, bytes, words;
        for (std::size_t k = 0; k < e.ids.size(); ++k) {
            tokens.append(py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(e.tokens[k].data(), static_cast<Py_ssize_t>(e.tokens[k].size()), "replace")));
            const std::string label = tok.token_label(e.ids[k]);
            labels.append(py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(label.data(), static_cast<Py_ssize_t>(label.size()), "replace")));
            offsets.append(py::make_tuple(e.offsets[k].first, e.offsets[k].second));
            bytes.append(py::make_tuple(e.byte_offsets[k].first, e.byte_offsets[k].second));
            if (e.word_ids[k]) words.append(*e.word_ids[k]);
            else words.append(py::none());
        }
        d["tokens"] = tokens;
        d["labels"] = labels;
        d["offsets"] = offsets;
        d["byte_offsets"] = bytes;
        d["word_ids"] = words;
        std::vector<int> mask(e.special_tokens_mask.begin(), e.special_tokens_mask.end());
        d["special_tokens_mask"] = mask;
        out.append(d);
    }
    return out;
}

py::str utf8_replace(const std::string& s) {
    return py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace"));
}

py::list str_list(const std::vector<std::string>& v) {
    py::list out;
    for (const auto& s : v) out.append(utf8_replace(s));
    return out;
}

}  // namespace

PYBIND11_MODULE(_attn, m) {
    m.doc() = "attn's C extension (use the package attn: import attn).";
    py::register_exception_translator(translate);

    py::class_<result_doc, std::shared_ptr<result_doc>>(m, "Document", "The document attn compute writes (internal).")
        .def("names", [](const result_doc& r) {
            std::vector<std::string> n;
            for (const auto& t : r.doc.tensors) n.push_back(t.name);
            return n;
        })
        .def("array", [](const std::shared_ptr<result_doc>& r, std::size_t i) { return tensor_array(r, i); })
        .def("axes", [](const result_doc& r, std::size_t i) { return attn::io::tensor_axes(r.doc, r.doc.tensors.at(i)); })
        .def("meta_json", [](const result_doc& r) {
            return utf8_replace(r.doc.meta.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
        })
        .def_property_readonly("tokens", [](const result_doc& r) { return str_list(r.doc.tokens); })
        .def_property_readonly("tokens_kv", [](const result_doc& r) { return str_list(r.doc.tokens_kv); })
        .def_property_readonly("words", [](const result_doc& r) { return str_list(r.doc.words); })
        .def("write", [](const result_doc& r, const std::string& path, const std::string& format) {
            py::gil_scoped_release nogil;
            write_result(r, path, format);
        }, py::arg("path"), py::arg("format") = "");

    m.def("compute", &py_compute, py::arg("input"), py::arg("bundle"), py::arg("bundle_tokens"), py::arg("arrays"),
          py::arg("words"));
    m.def("run_cli", [](const std::vector<std::string>& words) {
        auto status = std::make_shared<int>(0);  // outlives this call if interrupted
        run_interruptible([status, words]() {
            *status = run_cli(words);
            return std::shared_ptr<result_doc>();
        });
        return *status;
    }, py::arg("words"));
    m.def("compute_options", &compute_options_list);
    m.def("input_kinds", &input_kinds_list);
    m.def("tokenize", &py_tokenize, py::arg("texts"), py::arg("tokenizer"), py::arg("special_tokens") = true);
    m.def("canonical_name", [](const std::string& n) { return attn::io::canonical_name(n); });
    m.def("is_input_name", [](const std::string& n) { return attn::io::is_attn_name(n); });
    m.def("wait_abandoned", &wait_abandoned);
    m.def("running_abandoned", &running_abandoned);
    m.def("stage_names", [] { return attn::stage_names(); });
    m.attr("version") = ATTN_VERSION;
}
