#include <csignal>
#include <signal.h>
#include <cstdio>
#include <exception>
#include <iostream>
#include <new>
#include <unistd.h>

#include "attn/error.hpp"
#include "attn/io/output.hpp"
#include "commands.hpp"

namespace attn::cli {

namespace {

constexpr const char* footer = R"(Exit codes: 0 success; 1 data error (unreadable file, bad shape, bad values, or
any failed item of a batch); 2 usage error. Errors are one line on stderr:
  attn: error: <source>: <what> (expected <x>, got <y>)
Data goes to stdout (or -o); diagnostics to stderr.)";

void error_line(const std::string& what) { std::cerr << "attn: error: " << what << '\n'; }

extern "C" void on_signal(int sig) {
    io::remove_pending_temporaries();
    _exit(128 + sig);
}

/// Interrupted runs leave no partial file (DESIGN §2). A signal that is ignored when attn
/// starts (nohup, `attn ... &` in a script) stays ignored.
void remove_temporaries_on(int sig) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) return;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
    remove_temporaries_on(SIGINT);
    remove_temporaries_on(SIGTERM);
    remove_temporaries_on(SIGHUP);

    CLI::App app{"attn: scaled dot-product attention with every stage dumped (scores, weights, output) "
                 "as JSON, CSV or NumPy files.",
                 "attn"};
    app.footer(footer);
    app.set_version_flag("--version", ATTN_VERSION);
    app.require_subcommand(1);
    int status = exit_ok;
    setup_compute(app, status);
    setup_generate(app, status);
    setup_posenc(app, status);
    setup_inspect(app, status);
    setup_compare(app, status);
    setup_plot(app, status);

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);
        error_line(e.what());
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
