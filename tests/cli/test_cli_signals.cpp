// Every catchable terminating signal during a run leaves no partial file: the real binary
// removes its pending temporaries and exits with 128 + the signal number (src/cli/app.cpp),
// in single runs and in parallel batches, and under `ulimit -f` (SIGXFSZ).

#include <doctest/doctest.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli_util.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/output.hpp"
#include "attn/tensor.hpp"
#include "npz_members.hpp"

namespace {

std::vector<std::string> entries_of(const std::string& dir) {
    std::vector<std::string> out;
    if (DIR* d = opendir(dir.c_str())) {
        while (const dirent* e = readdir(d))
            if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) out.push_back(e->d_name);
        closedir(d);
    }
    return out;
}

struct scratch {
    std::string dir;
    scratch() {
        dir = attn_test::temp_dir();
    }
    ~scratch() { std::system(("rm -rf '" + dir + "'").c_str()); }
    std::vector<std::string> entries() const { return entries_of(dir); }
    bool has_temporary() const {
        for (const auto& e : entries())
            if (e.find(".attn-") != std::string::npos) return true;
        return false;
    }
};

/// Starts `attn args...` from the source directory with `extra_env` added, stdout to
/// /dev/null, stderr to `err_path`, and the signals under test at their default
/// disposition (as a shell gives them), whatever the test runner's are.
pid_t spawn(const std::vector<std::string>& args, const std::vector<std::string>& extra_env,
            const std::string& err_path = "/dev/null") {
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
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (err < 0) return -1;
    // Only async-signal-safe calls between fork and exec.
    const pid_t pid = fork();
    if (pid == 0) {
        for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGXCPU, SIGXFSZ, SIGPIPE})
            signal(sig, SIG_DFL);
        if (chdir(ATTN_SOURCE_DIR) != 0) _exit(126);
        const int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(err, 2);
        execve(argv[0], argv.data(), envp.data());
        _exit(127);
    }
    close(err);
    return pid;
}

/// True when process `pid` holds open a temporary output file in `dir`: a named one
/// ("….attn-XXXXXX") or an unnamed O_TMPFILE one, which /proc shows as "dir/#INODE (deleted)".
bool holds_temporary(pid_t pid, const std::string& dir) {
    const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
    for (const auto& e : entries_of(fds)) {
        char target[4096];
        const ssize_t n = readlink((fds + "/" + e).c_str(), target, sizeof target - 1);
        if (n <= 0) continue;
        const std::string t(target, static_cast<std::size_t>(n));
        if (t.rfind(dir + "/", 0) == 0 && (t.find(".attn-") != std::string::npos || t.rfind(dir + "/#", 0) == 0))
            return true;
    }
    return false;
}

/// Waits up to `seconds` for a temporary file to appear (by name, or open in `pid`);
/// false on timeout or if the process ended first.
bool wait_for_temporary(const scratch& s, pid_t pid, double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
        if (s.has_temporary() || holds_temporary(pid, s.dir)) return true;
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

TEST_CASE("signals: interrupted while the output is pending, no file and no temporary remain, one line said") {
    // Deterministic: the test-only hook makes commit() wait with the complete temporary
    // in place (attn/io/output.hpp), so the signal always arrives mid-run.
    const std::vector<std::pair<int, std::string>> signals{
        {SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"},   {SIGHUP, "SIGHUP"},   {SIGQUIT, "SIGQUIT"}, {SIGUSR1, "SIGUSR1"},
        {SIGUSR2, "SIGUSR2"}, {SIGALRM, "SIGALRM"}, {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGPIPE, ""}};
    for (const auto& [sig, name] : signals) {
        CAPTURE(sig);
        scratch s;
        const std::string out = s.dir + "/out.json";
        const std::string err = attn_test::temp_dir();
        const pid_t pid = spawn({"compute", "--mask", "causal", "data/x.npy", "-o", out},
                                {"ATTN_TEST_PAUSE_BEFORE_COMMIT_MS=60000"}, err + "/stderr");
        REQUIRE(pid > 0);
        const bool pending = wait_for_temporary(s, pid, 60);
        CHECK(pending);
        kill(pid, sig);
        CHECK(exit_status(pid) == 128 + sig);
        CHECK(s.entries().empty());
        // The exit code says which signal; SIGPIPE (the reader went away) says nothing.
        CHECK(attn_test::slurp(err + "/stderr") == (name.empty() ? "" : "attn: error: interrupted by " + name + "\n"));
        std::system(("rm -rf '" + err + "'").c_str());
    }
}

TEST_CASE("signals: a batch of 200 workers interrupted says one line, not one per worker") {
    // 300 inputs on 200 workers: with the hook, 200 temporaries are pending when SIGINT
    // lands; without it, workers are reading and writing. Either way the handler's line
    // is the only one: no worker reports the files swept from under it.
    for (const bool hook : {true, false}) {
        CAPTURE(hook);
        scratch s;
        const std::string out = s.dir + "/out/";
        std::vector<std::string> args{"compute", "--mask", "causal", "--dump", "weights", "-j", "200", "-o", out};
        for (int i = 0; i < 300; ++i) args.push_back(i % 2 ? "data/x.npy" : "data/notebook.npz");
        const std::string err = s.dir + "/stderr";
        const pid_t pid = spawn(args, hook ? std::vector<std::string>{"ATTN_TEST_PAUSE_BEFORE_COMMIT_MS=60000"}
                                           : std::vector<std::string>{}, err);
        REQUIRE(pid > 0);
        const std::size_t want = hook ? 200 : 1;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (entries_of(out).size() < want && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        kill(pid, SIGINT);
        const int code = exit_status(pid);
        if (hook || code != 0) {
            CHECK(code == 128 + SIGINT);
            CHECK(attn_test::slurp(err) == "attn: error: interrupted by SIGINT\n");
            for (const auto& e : entries_of(out)) CHECK(e.find(".attn-") == std::string::npos);
        } else {
            CHECK(attn_test::slurp(err).empty());  // finished before the signal: 300 whole files
            CHECK(entries_of(out).size() == 300);
        }
    }
}

namespace {

/// A (t, 16) float32 .npy at `path`, for a run whose output takes a while to write.
std::string write_input(const std::string& path, std::size_t t) {
    std::vector<float> values(t * 16);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((i * 7919) % 1000) / 500.f - 1.f;
    attn::io::atomic_file f(path);
    attn::io::write_npy(f.stream(), attn::array::from<float>({t, 16}, values.data()));
    f.commit();
    return path;
}

}  // namespace

TEST_CASE("signals: SIGTERM while a large output is being written") {
    // No hook: a real run, signalled as soon as its temporary appears. Should a fast
    // machine finish before the signal lands, the run is repeated with a larger input;
    // either way no temporary may remain, and a finished run leaves a whole file.
    bool interrupted = false;
    for (std::size_t t = 1024; t <= 4096 && !interrupted; t *= 2) {
        CAPTURE(t);
        scratch s;
        const std::string in = write_input(s.dir + "/x.npy", t);
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

TEST_CASE("signals: a parallel batch into -o DIR/ interrupted with outputs pending leaves no temporary") {
    // Eight inputs on four workers, each output held just before its rename by the
    // test-only hook: four temporaries exist when the signal lands, and the workers
    // must not create more while the handler sweeps.
    for (int sig : {SIGINT, SIGQUIT, SIGUSR1, SIGALRM, SIGXCPU}) {
        CAPTURE(sig);
        scratch s;
        const std::string out = s.dir + "/out/";
        std::vector<std::string> args{"compute", "--mask", "causal", "-j", "4", "-o", out};
        for (int i = 0; i < 8; ++i) args.push_back(i % 2 ? "data/x.npy" : "data/notebook.npz");
        const pid_t pid = spawn(args, {"ATTN_TEST_PAUSE_BEFORE_COMMIT_MS=60000"});
        REQUIRE(pid > 0);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (entries_of(out).size() < 4 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        CHECK(entries_of(out).size() == 4);
        kill(pid, sig);
        CHECK(exit_status(pid) == 128 + sig);
        CHECK(entries_of(out).empty());
    }
}

TEST_CASE("signals: a run over its file size limit (ulimit -f, SIGXFSZ) leaves no partial file") {
    scratch s;
    const std::string cmd = "cd '" + std::string(ATTN_SOURCE_DIR) + "' && ulimit -f 16 && exec '" + ATTN_BINARY +
                            "' generate --len 512 --dk 64 --seed 1 --format json -o '" + s.dir + "/big.json' 2>/dev/null";
    const int status = std::system(cmd.c_str());
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 128 + SIGXFSZ);
    CHECK(s.entries().empty());
}

TEST_CASE("signals: SIGKILL while an output is being written leaves no file behind, not even a temporary") {
    // SIGKILL cannot be caught: only a temporary that has no name until commit() (O_TMPFILE)
    // is gone with the process. Killed as soon as the temporary is open; should a fast
    // machine finish first, the run is repeated with a larger input.
    bool killed = false;
    for (std::size_t t = 1024; t <= 4096 && !killed; t *= 2) {
        CAPTURE(t);
        scratch s;
        const std::string in = write_input(s.dir + "/x.npy", t);
        const pid_t pid = spawn({"compute", in, "--dump", "weights", "-o", s.dir + "/out.json"}, {});
        REQUIRE(pid > 0);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
        int status = 0;
        bool open = false;
        while (std::chrono::steady_clock::now() < deadline && !(open = holds_temporary(pid, s.dir)) &&
               waitpid(pid, &status, WNOHANG) == 0)
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        if (open) {
            kill(pid, SIGKILL);
            REQUIRE(waitpid(pid, &status, 0) == pid);
        }
        killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
        if (killed) CHECK(s.entries() == std::vector<std::string>{"x.npy"});
        else CHECK(s.entries().size() == 2);  // finished first: the file is there, whole
    }
    CHECK(killed);
}

TEST_CASE("signals: SIGKILL during a streamed .npz of several layers leaves the destination as it was, and no temporary") {
    // gemma3-tiny at T = 1024: four layers of 16 MiB of weights, each written to the
    // temporary as it is computed. Killed as soon as the temporary is open; should the run
    // finish first, it is tried again (a finished run leaves the whole file).
    bool killed = false;
    for (int attempt = 0; attempt < 3 && !killed; ++attempt) {
        CAPTURE(attempt);
        scratch s;
        attn_test::write_cycled_ids(s.dir + "/ids.npy", 1024);
        const std::string out = s.dir + "/out.npz";
        attn_test::spit(out, "before");
        const pid_t pid = spawn({"compute", "tests/fixtures/checkpoints/gemma3-tiny", "--layer", "all", "--token-ids",
                                 s.dir + "/ids.npy", "--dump", "weights", "-o", out},
                                {});
        REQUIRE(pid > 0);
        if (wait_for_temporary(s, pid, 120)) kill(pid, SIGKILL);
        int status = 0;
        REQUIRE(waitpid(pid, &status, 0) == pid);
        killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
        std::vector<std::string> names = s.entries();
        std::sort(names.begin(), names.end());
        CHECK(names == std::vector<std::string>{"ids.npy", "out.npz"});
        if (killed) CHECK(attn_test::slurp(out) == "before");
    }
    CHECK(killed);
}

TEST_CASE("signals: an .npz or .npy write refused by the file size limit, SIGXFSZ ignored, says why and leaves no file") {
    // With SIGXFSZ ignored (as a shell's `trap '' XFSZ` leaves it), write(2) fails with
    // EFBIG: the one line gives that reason, and no file or temporary remains.
    scratch s;
    REQUIRE(attn_test::run_attn("generate --len 64 --dk 8 --seed 1 -o '" + s.dir + "/in.npz'").code == 0);
    for (const std::string ext : {"npz", "npy"}) {
        CAPTURE(ext);
        const std::string out = s.dir + "/out." + ext;
        const auto r = attn_test::run_attn("compute '" + s.dir + "/in.npz' --dump weights -o '" + out + "'", "",
                                           "trap '' XFSZ; ulimit -f 4; ");
        CHECK(r.code == 1);
        CHECK(r.err == "attn: error: " + out + ": cannot write ." + ext + " data (File too large)\n");
        CHECK(s.entries() == std::vector<std::string>{"in.npz"});
    }
}
