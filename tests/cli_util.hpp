#pragma once
// Runs the real `attn` binary for CLI golden tests (as jq's tests do).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
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

/// One run's exit code and peak memory in KiB; throws std::runtime_error (the test case
/// fails) when the measurement is missing. `prefix` is run_attn's (e.g. "TMPDIR=… "). The
/// run is measured by GNU time (`/usr/bin/time -f %M`: wait4's ru_maxrss of its child), so
/// that the process measured is the child of a small one: a process's memory high-water
/// mark starts at its parent's RSS when forked and survives exec, so measured as a child of
/// this test process (grown large when the whole suite runs in one process, as the Full
/// configuration runs it, and large from the start under AddressSanitizer) it would count
/// that RSS as the run's.
struct measured_run {
    int code = -1;
    long peak_kb = -1;
};

inline measured_run run_attn_measured(const std::string& args, const std::string& prefix = "") {
    static int counter = 0;
    const std::string report = run_dir() + "/peak-" + std::to_string(counter++);
    const run_result r = run_attn(args, "", prefix + "/usr/bin/time -q -f %M -o '" + report + "' ");
    const std::string text = slurp(report);
    std::remove(report.c_str());
    char* end = nullptr;
    const long peak_kb = std::strtol(text.c_str(), &end, 10);
    if (end == text.c_str() || peak_kb <= 0)
        throw std::runtime_error("no peak memory from /usr/bin/time for `attn " + args + "`: \"" + text + "\"; stderr: " + r.err);
    return {r.code, peak_kb};
}

}  // namespace attn_test
