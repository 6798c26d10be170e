// SIGINT, SIGTERM and SIGHUP during a run leave no partial file: the real binary removes
// its pending temporaries and exits with 128 + the signal number (src/cli/app.cpp).

#include <doctest/doctest.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "attn/io/npy.hpp"
#include "attn/io/output.hpp"
#include "attn/tensor.hpp"

namespace {

struct scratch {
    std::string dir;
    scratch() {
        char templ[] = "/tmp/attn-test-signals-XXXXXX";
        REQUIRE(mkdtemp(templ) != nullptr);
        dir = templ;
    }
    ~scratch() { std::system(("rm -rf '" + dir + "'").c_str()); }
    std::vector<std::string> entries() const {
        std::vector<std::string> out;
        if (DIR* d = opendir(dir.c_str())) {
            while (const dirent* e = readdir(d))
                if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) out.push_back(e->d_name);
            closedir(d);
        }
        return out;
    }
    bool has_temporary() const {
        for (const auto& e : entries())
            if (e.find(".attn-") != std::string::npos) return true;
        return false;
    }
};

/// Starts `attn args...` from the source directory with `extra_env` added, output to
/// /dev/null, and the signals under test at their default disposition (as a shell
/// gives them), whatever the test runner's are.
pid_t spawn(const std::vector<std::string>& args, const std::vector<std::string>& extra_env) {
    std::vector<std::string> strings{ATTN_BINARY};
    strings.insert(strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_strings = extra_env;
    for (char** e = environ; *e; ++e) env_strings.push_back(*e);
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    // Only async-signal-safe calls between fork and exec.
    const pid_t pid = fork();
    if (pid == 0) {
        for (int sig : {SIGINT, SIGTERM, SIGHUP}) signal(sig, SIG_DFL);
        if (chdir(ATTN_SOURCE_DIR) != 0) _exit(126);
        const int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execve(argv[0], argv.data(), envp.data());
        _exit(127);
    }
    return pid;
}

/// Waits up to `seconds` for a temporary file to appear; false on timeout or if the
/// process ended first.
bool wait_for_temporary(const scratch& s, pid_t pid, double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
        if (s.has_temporary()) return true;
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return false;
}

int exit_status(pid_t pid) {
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("signals: interrupted while the output is pending, no file and no temporary remain") {
    // Deterministic: the test-only hook makes commit() wait with the complete temporary
    // in place (attn/io/output.hpp), so the signal always arrives mid-run.
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
        CAPTURE(sig);
        scratch s;
        const std::string out = s.dir + "/out.json";
        const pid_t pid = spawn({"compute", "--mask", "causal", "data/x.npy", "-o", out},
                                {"ATTN_TEST_PAUSE_BEFORE_COMMIT_MS=60000"});
        REQUIRE(pid > 0);
        const bool pending = wait_for_temporary(s, pid, 60);
        CHECK(pending);
        kill(pid, sig);
        CHECK(exit_status(pid) == 128 + sig);
        CHECK(s.entries().empty());
    }
}

TEST_CASE("signals: SIGTERM while a large output is being written") {
    // No hook: a real run, signalled as soon as its temporary appears. Should a fast
    // machine finish before the signal lands, the run is repeated with a larger input;
    // either way no temporary may remain, and a finished run leaves a whole file.
    bool interrupted = false;
    for (std::size_t t = 1024; t <= 4096 && !interrupted; t *= 2) {
        CAPTURE(t);
        scratch s;
        const std::string in = s.dir + "/x.npy";
        {
            std::vector<float> values(t * 16);
            for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((i * 7919) % 1000) / 500.f - 1.f;
            attn::io::atomic_file f(in);
            attn::io::write_npy(f.stream(), attn::array::from<float>({t, 16}, values.data()));
            f.commit();
        }
        const std::string out = s.dir + "/out.json";
        const pid_t pid = spawn({"compute", in, "--dump", "weights", "-o", out}, {});
        REQUIRE(pid > 0);
        const bool pending = wait_for_temporary(s, pid, 120);
        if (pending) kill(pid, SIGTERM);
        const int code = exit_status(pid);
        CHECK_FALSE(s.has_temporary());
        if (code == 128 + SIGTERM) {
            interrupted = true;
            CHECK(s.entries() == std::vector<std::string>{"x.npy"});
        } else {
            CHECK(code == 0);  // finished first: the file is there, whole
            CHECK(s.entries().size() == 2);
        }
    }
    CHECK(interrupted);
}
