// libFuzzer target: the real command line, attn::cli::main, from option parsing through
// the pipeline to the writers (scripts/fuzz.sh runs it).
//
// Input layout: "<argv lines>\0<file bytes>". Each line of the part before the first NUL
// is one argument after `attn compute`; the bytes after it are written to a file named
// "in" in a private scratch directory (under $TMPDIR), the working directory during the
// run, so arguments such as `in`, `--q in:q` or `-o out.npz` refer to it. Without a NUL
// there is no file. Arguments that could reach outside the scratch directory or read stdin
// (anything with '/', "-", "--opt=-") are dropped; stdin is /dev/null anyway, and the
// readers' limit is 64 MiB unless the input gives --max-bytes.
//
// attn::cli::main catches every attn::error and returns an exit code; a crash, a
// sanitizer report, a leak, a hang or an escaped exception is a bug.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <streambuf>
#include <string>
#include <string_view>
#include <vector>

#include "attn/io/limits.hpp"
#include "cli/commands.hpp"

namespace {

constexpr std::size_t max_args = 48;

/// Swallows whatever attn prints: the writers still format everything.
class null_buffer : public std::streambuf {
protected:
    int_type overflow(int_type c) override {
        setp(buf_, buf_ + sizeof buf_);
        return traits_type::not_eof(c);
    }
    std::streamsize xsputn(const char*, std::streamsize n) override { return n; }

private:
    char buf_[4096];
};

void clear_scratch();

// A plain array: the atexit cleanup must not outlive a static std::string.
char scratch[4096];

const char* scratch_dir() {
    static const bool made = [] {
        const char* tmp = std::getenv("TMPDIR");
        std::snprintf(scratch, sizeof scratch, "%s/attn-fuzz-cli-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(scratch)) std::abort();
        // A manifest can still name "-": stdin is empty rather than a terminal to wait on.
        const int null = open("/dev/null", O_RDONLY);
        if (null < 0 || dup2(null, 0) < 0) std::abort();
        close(null);
        std::atexit([] {
            clear_scratch();
            rmdir(scratch);
        });
        return true;
    }();
    (void)made;
    return scratch;
}

void clear_scratch() {
    DIR* d = opendir(scratch);
    if (!d) return;
    while (dirent* e = readdir(d)) {
        if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
        unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

bool allowed(const std::string& arg) {
    if (arg.find('/') != std::string::npos) return false;
    if (arg == "-") return false;
    if (arg.size() >= 2 && arg.compare(arg.size() - 2, 2, "=-") == 0) return false;
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const std::size_t nul = input.find('\0');
    const std::string_view argv_text = input.substr(0, nul);

    std::vector<std::string> args{"attn", "compute"};
    std::size_t start = 0;
    while (start <= argv_text.size() && args.size() < max_args + 2) {
        std::size_t end = argv_text.find('\n', start);
        if (end == std::string_view::npos) end = argv_text.size();
        std::string arg(argv_text.substr(start, end - start));
        if (!arg.empty() && allowed(arg)) args.push_back(std::move(arg));
        start = end + 1;
    }

    const int home = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (home < 0 || chdir(scratch_dir()) != 0) std::abort();
    if (nul != std::string_view::npos) {
        std::ofstream f("in", std::ios::binary);
        f.write(input.data() + nul + 1, static_cast<std::streamsize>(size - nul - 1));
    }

    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    // Each run starts from the same limit, whatever --max-bytes the previous one gave;
    // 64 MiB keeps inputs a manifest may name (/dev/zero) within the fuzzer's memory.
    attn::io::set_max_array_bytes(std::size_t{64} << 20);
    null_buffer sink;
    std::streambuf* out = std::cout.rdbuf(&sink);
    std::streambuf* err = std::cerr.rdbuf(&sink);
    const int code = attn::cli::main(static_cast<int>(args.size()), argv.data());
    std::cout.rdbuf(out);
    std::cerr.rdbuf(err);

    clear_scratch();
    if (fchdir(home) != 0) std::abort();
    close(home);
    if (code < 0 || code > 2) __builtin_trap();  // only the documented exit codes
    return 0;
}
