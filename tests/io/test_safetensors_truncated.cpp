// A checkpoint truncated while attn holds a view of its mapping (include/attn/io/safetensors.hpp,
// end_process_on_lost_mapping): reading the view's lost pages raises SIGBUS outside any
// guard, which the handler attn's main installs turns into one line and exit status 1.
// Deterministic: a forked child maps the file, takes a view, truncates the file itself and
// then reads the view, with the same call main makes; the parent checks the child's stderr
// and exit status. (Truncating the file while the attn binary runs would be a race.)
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <string>

#include "attn/io/safetensors.hpp"
#include "cli_util.hpp"
#include "scratch_dir.hpp"

TEST_CASE("safetensors: a view read after its file was truncated ends the process with one line and exit 1, not SIGBUS") {
    attn_test::scratch_dir dir;
    const std::string path = dir.path + "/t.safetensors";
    // 64 KiB of float32 data, many pages, the header padded so that the data is 8-aligned
    // (a view, not a copy).
    std::string header = R"({"x":{"dtype":"F32","shape":[16384],"data_offsets":[0,65536]}})";
    header += std::string((8 - (8 + header.size()) % 8) % 8, ' ');
    std::string bytes(8, '\0');
    for (std::size_t i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
    bytes += header + std::string(65536, '\0');
    attn_test::spit(path, bytes);

    int err[2];
    REQUIRE(::pipe(err) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::dup2(err[1], STDERR_FILENO);
        ::close(err[0]);
        attn::io::end_process_on_lost_mapping("attn: error: ");  // as attn's main
        const auto ck = attn::io::checkpoint::open(path);
        const attn::array x = ck.load("x");
        if (!x.data.is_view()) ::_exit(3);
        if (::truncate(path.c_str(), static_cast<off_t>(8 + header.size())) != 0) ::_exit(4);
        volatile unsigned char sink = 0;
        for (std::size_t i = 0; i < x.data.size(); i += 4096) sink = sink ^ std::to_integer<unsigned char>(x.data.data()[i]);
        ::_exit(0);
    }
    ::close(err[1]);
    std::string said;
    char buf[4096];
    for (ssize_t n; (n = ::read(err[0], buf, sizeof buf)) > 0;) said.append(buf, static_cast<std::size_t>(n));
    ::close(err[0]);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CAPTURE(said);
    REQUIRE_MESSAGE(WIFEXITED(status), "ended by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0));
    CHECK(WEXITSTATUS(status) == 1);
    CHECK(said == "attn: error: " + path + ": file changed while being read (expected " + std::to_string(bytes.size()) +
                      " bytes, as when it was opened, got fewer (bus error reading its data))\n");
}
