#pragma once
// Runs the real `attn` binary for CLI golden tests (as jq's tests do).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace attn_test {

/// A bound on a child attn's peak memory, in MB, given as measured for a release build:
/// three times that, plus 32 MB, under AddressSanitizer, whose shadow memory and quarantine
/// raise every RSS, and whose runtime's own share grows with the binary (`attn --version`
/// alone peaked at 141 MB under ASan against 14 MB in release on an AMD EPYC, once the
/// families of 2026 were in; runs bounded by 3 × 48 MB then peaked at 148–152 MB). The
/// defects these bounds catch cost hundreds of MB to several GB, above either bound. Run through
/// ATTN_TEST_WRAPPER (qemu-user emulating another CPU), the emulator's own translation
/// cache and state join the process's RSS: 64 MB more (measured: +27 MB for a 143 MB run).
inline double peak_bound_mb(double release_mb) {
    const char* wrapper = std::getenv("ATTN_TEST_WRAPPER");
    const double emulator_mb = wrapper && *wrapper ? 64 : 0;
#if defined(__SANITIZE_ADDRESS__)
    return 3 * release_mb + 32 + emulator_mb;
#else
    return release_mb + emulator_mb;
#endif
}

/// A run_attn prefix for memory bounds of runs that free as they go: under AddressSanitizer
/// freed blocks wait in a 256 MB quarantine before reuse and count as held; this keeps
/// 16 MB of it (any other ASAN_OPTIONS kept; without the sanitizer the variable is unread).
inline const std::string small_quarantine = "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16\" ";

struct run_result {
    int code = -1;
    std::string out;
    std::string err;
};

inline std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

inline void spit(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary);
    f << bytes;
}

/// A fresh empty directory under $TMPDIR (or /tmp), never under the working directory:
/// a test killed mid-run must not leave its files in the checkout.
/// Throws std::runtime_error if it cannot be made: falling back to the working directory
/// (the checkout) would put test files where concurrent suites share them.
inline std::string temp_dir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/attn-test-XXXXXX";
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("cannot make a temporary folder from " + tmpl);
    return tmpl;
}

/// This process's own folder for run_attn's stdin/stdout/stderr files, made on first use
/// under $TMPDIR and removed (it is empty by then) when the process exits.
inline const std::string& run_dir() {
    struct owned {
        std::string path = temp_dir();
        ~owned() { ::rmdir(path.c_str()); }
    };
    static const owned dir;
    return dir.path;
}

/// `text` with every run of whitespace (newlines and the indentation of wrapped --help
/// lines included) made one space: phrases can be found whatever the wrapping.
inline std::string joined_words(const std::string& text) {
    std::istringstream words(text);
    std::string out;
    for (std::string w; words >> w;) out += (out.empty() ? "" : " ") + w;
    return out;
}

/// Runs `attn <args>` through the shell from the source directory (so data/... paths
/// work), feeding `input` on stdin. args is shell text: quote as needed.
/// `prefix` is shell text run before attn in the same shell (e.g. "ulimit -s N && ").
inline run_result run_attn(const std::string& args, const std::string& input = "", const std::string& prefix = "") {
    static int counter = 0;
    const std::string base = run_dir() + "/run-" + std::to_string(counter++);
    spit(base + ".in", input);
    // ATTN_TEST_WRAPPER runs attn through a command, e.g. an emulated CPU (tests/CMakeLists.txt).
    const char* wrapper = std::getenv("ATTN_TEST_WRAPPER");
    const std::string wrap = wrapper && *wrapper ? std::string(wrapper) + " " : "";
    const std::string cmd = std::string("cd '") + ATTN_SOURCE_DIR + "' && " + prefix + wrap + "'" + ATTN_BINARY + "' " + args +
                            " <'" + base + ".in' >'" + base + ".out' 2>'" + base + ".err'";
    const int status = std::system(cmd.c_str());
    run_result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(base + ".out");
    r.err = slurp(base + ".err");
    std::remove((base + ".in").c_str());
    std::remove((base + ".out").c_str());
    std::remove((base + ".err").c_str());
    return r;
}

/// Runs `args` (run_attn's, with `prefix`) and writes its exit code and the peak memory of
/// its children in KiB (getrusage(RUSAGE_CHILDREN)) to file descriptor `fd`: the body of
/// `attn_tests --measure-run FD ARGS PREFIX` (tests/main.cpp).
inline int measure_run_main(int fd, const std::string& args, const std::string& prefix) {
    const run_result r = run_attn(args, "", prefix);
    struct rusage ru {};
    getrusage(RUSAGE_CHILDREN, &ru);
    const long report[2] = {r.code, ru.ru_maxrss};
    return write(fd, report, sizeof report) == static_cast<ssize_t>(sizeof report) ? 0 : 1;
}

/// One run's exit code and peak memory in KiB, measured in a fresh process whose only
/// child the run is, so that earlier runs do not count (getrusage(RUSAGE_CHILDREN)); code
/// −1 when the fork or its report fails. `prefix` is run_attn's (e.g. "TMPDIR=… "). The
/// process is this test program exec'd anew (`--measure-run`), not a plain fork: a forked
/// child's memory high-water mark starts at the forking process's RSS and survives exec,
/// so a fork of a test process grown large (the whole suite in one process, as the Full
/// configuration runs it) would count that RSS as the run's.
struct measured_run {
    int code = -1;
    long peak_kb = -1;
};

inline measured_run run_attn_measured(const std::string& args, const std::string& prefix = "") {
    int fds[2];
    if (pipe(fds) != 0) return {};
    const pid_t pid = fork();
    if (pid < 0) return {};
    if (pid == 0) {
        close(fds[0]);
        const std::string fd = std::to_string(fds[1]);
        execl("/proc/self/exe", "attn_tests", "--measure-run", fd.c_str(), args.c_str(), prefix.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    long report[2] = {-1, -1};
    const bool read_all = read(fds[0], report, sizeof report) == static_cast<ssize_t>(sizeof report);
    close(fds[0]);
    close(fds[1]);
    waitpid(pid, nullptr, 0);
    if (!read_all) return {};
    return {static_cast<int>(report[0]), report[1]};
}

}  // namespace attn_test
