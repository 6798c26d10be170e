#include <csignal>
#include <signal.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
#include <exception>
#include <iostream>
#include <new>
#include <unistd.h>

#include "attn/core/blas_core.hpp"
#include "attn/core/softmax.hpp"
#include "attn/error.hpp"
#include "attn/io/output.hpp"
#include "attn/io/safetensors.hpp"
#include "attn/memory.hpp"
#include "commands.hpp"
#include "diagnostics.hpp"
#include "help_format.hpp"
#include "parse_errors.hpp"

namespace attn::cli {

namespace {

constexpr const char* footer = R"(Exit codes: 0 success; 1 data error (unreadable file, bad shape, bad values, or
an item of a batch that failed by one); 2 usage error, in a batch too. Errors
are one line on stderr:
  attn: error: <source>: <what> (expected <x>, got <y>)
Data goes to stdout (or -o); diagnostics to stderr.)";

void error_line(const std::string& what) { print_error(what); }

/// The name a terminating signal is known by, for the one line of an interrupted run.
const char* signal_name(int sig) {
    switch (sig) {
        case SIGHUP: return "SIGHUP";
        case SIGINT: return "SIGINT";
        case SIGQUIT: return "SIGQUIT";
        case SIGTERM: return "SIGTERM";
        case SIGUSR1: return "SIGUSR1";
        case SIGUSR2: return "SIGUSR2";
        case SIGALRM: return "SIGALRM";
        case SIGVTALRM: return "SIGVTALRM";
        case SIGPROF: return "SIGPROF";
        case SIGXCPU: return "SIGXCPU";
        case SIGXFSZ: return "SIGXFSZ";
        case SIGPOLL: return "SIGPOLL";
        case SIGSTKFLT: return "SIGSTKFLT";
        case SIGPWR: return "SIGPWR";
        default: return "a signal";
    }
}

// One line, after every temporary is gone and once the workers print nothing more
// (print_error checks io::stop_requested): "attn: error: interrupted by SIGINT".
// SIGPIPE says nothing: the reader of the output went away (`attn … | head`), as
// with cat. Only async-signal-safe calls here.
extern "C" void on_signal(int sig) {
    io::stop_and_remove_temporaries();
    if (sig != SIGPIPE) {
        // One write, so that the line arrives whole.
        char line[64];
        std::size_t len = 0;
        for (const char* part : {"attn: error: interrupted by ", signal_name(sig), "\n"})
            for (; *part && len < sizeof line; ++part) line[len++] = *part;
        [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, line, len);
    }
    _exit(128 + sig);
}

// Faults and abort() keep their default action (a core dump) after the clean-up.
extern "C" void on_fault(int sig) {
    io::stop_and_remove_temporaries();
    signal(sig, SIG_DFL);
    raise(sig);
}

/// Interrupted runs leave no partial file (docs/design.md §2): every signal whose default action
/// terminates the process removes the temporaries first. Only a signal at its default
/// action is taken: one ignored when attn starts (nohup, `attn ... &` in a script) stays
/// ignored, and one that already has a handler keeps it — the fuzz build's host
/// (libFuzzer) has its own for SIGALRM (-timeout), SIGINT and the faults.
void remove_temporaries_on(int sig, void (*handler)(int)) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) return;
    struct sigaction sa {};
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
}

void install_signal_handlers() {
    for (int sig : {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU,
                    SIGXFSZ, SIGPIPE, SIGPOLL, SIGSTKFLT, SIGPWR})
        remove_temporaries_on(sig, on_signal);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__has_feature)
#define ATTN_OWN_FAULT_HANDLERS 1
#elif defined(__has_feature)
#if !__has_feature(address_sanitizer) && !__has_feature(undefined_behavior_sanitizer)
#define ATTN_OWN_FAULT_HANDLERS 1
#endif
#endif
#if defined(ATTN_OWN_FAULT_HANDLERS)
    // Sanitizer builds keep their own reports of these.
    for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGSYS, SIGTRAP}) remove_temporaries_on(sig, on_fault);
#endif
}

/// Test-only: with ATTN_TEST_PAUSE_BEFORE_COMMIT_MS=N in the environment, every output
/// file waits N ms with its complete temporary in place before the rename, so that
/// tests/cli/test_cli_signals.cpp can interrupt a run at a known point. Not for users.
void install_test_hooks() {
    static long pause_ms = 0;
    if (const char* ms = std::getenv("ATTN_TEST_PAUSE_BEFORE_COMMIT_MS")) {
        pause_ms = std::atol(ms);
        io::set_before_commit_hook([] { std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms)); });
    }
}

/// `attn --version`: the version on the first line, as before (scripts read it), then the
/// kernel path and the BLAS core this run computes with.
std::string version_text() {
    std::string isa;
    try {
        isa = core::kernel_isa();
    } catch (const std::exception& e) {
        isa = std::string("none (") + e.what() + ")";
    }
    return std::string(ATTN_VERSION) + "\nkernel path: " + isa + "\nBLAS: " + core::blas_core_summary();
}

}  // namespace

int main(int argc, char** argv) {
    keep_freed_memory();  // attn/memory.hpp: batch jobs reuse the last job's tensors
    install_signal_handlers();
    io::end_process_on_lost_mapping("attn: error: ");  // a checkpoint truncated under a view: one line, exit 1
    install_test_hooks();

    CLI::App app{"attn: scaled dot-product attention with every stage dumped (scores, weights, output) "
                 "as JSON, CSV or NumPy files.",
                 "attn"};
    app.formatter(help_formatter());
    app.footer(footer);
    app.set_version_flag("--version", version_text);
    app.require_subcommand(1);
    int status = exit_ok;
    setup_compute(app, status);
    setup_generate(app, status);
    setup_posenc(app, status);
    setup_inspect(app, status);
    setup_compare(app, status);
    setup_plot(app, status);
    setup_rope(app, status);
    setup_rollout(app, status);
    setup_view(app, status);
    setup_tokenize(app, status);

    // A bad ATTN_ISA (core::kernel_isa) is reported before any command runs; --help still works.
    // Before any command runs: a list option given twice, whose values CLI11 would join.
    const std::vector<std::string> words = split_empty_values(std::vector<std::string>(argv + 1, argv + argc));
    app.parse_complete_callback([&app, &words] {
        core::kernel_isa();
        refuse_repeated_lists(app, words);
    });
    try {
        std::vector<std::string> reversed(words.rbegin(), words.rend());  // CLI11 takes them last first
        app.parse(reversed);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);
        error_line(parse_error_message(e, app, argc, argv));
        return exit_usage_error;
    } catch (const usage_error& e) {
        error_line(e.what());
        return exit_usage_error;
    } catch (const error& e) {
        error_line(e.what());
        return exit_data_error;
    } catch (const std::bad_alloc&) {
        error_line("out of memory");
        return exit_data_error;
    } catch (const std::exception& e) {
        error_line(e.what());
        return exit_data_error;
    }
    return status;
}

}  // namespace attn::cli
