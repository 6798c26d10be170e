// libFuzzer target: the safetensors reader (io/safetensors.hpp) on arbitrary bytes
// (scripts/fuzz.sh runs it). Bytes starting with '{' are also written to a scratch
// *.safetensors.index.json and opened as a sharded checkpoint's index. An attn::error is
// a clean rejection; a crash, a sanitizer report, a leak or any other exception is a bug.
// What is accepted must hold together: entries contiguous from 0 within the data, each
// loaded tensor with as many bytes as its shape and dtype need.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include "attn/error.hpp"
#include "attn/io/safetensors.hpp"

namespace {

void check(const attn::io::checkpoint& ck, std::size_t data_bytes) {
    std::size_t total = 0;
    for (const auto& e : ck.tensors()) {
        if (e.end < e.begin || e.end > data_bytes) __builtin_trap();
        total += e.end - e.begin;
        if (ck.find(e.name) != &e) __builtin_trap();
        try {
            const attn::array a = ck.load(e.name);
            if (a.data.size() != a.size() * attn::dtype_size(a.type) || a.shape != e.shape) __builtin_trap();
        } catch (const attn::value_error&) {
            // a dtype attn does not read (C64, F4, …)
        }
    }
    if (total != data_bytes) __builtin_trap();
}

/// A scratch directory under $TMPDIR, made once per process and removed at exit (the
/// index written into it is unlinked after each input).
struct scratch_dir {
    std::string path;
    bool made = false;
    scratch_dir() {
        const char* tmp = std::getenv("TMPDIR");
        path = std::string(tmp && *tmp ? tmp : "/tmp") + "/attn-fuzz-st-XXXXXX";
        made = mkdtemp(path.data()) != nullptr;
        if (!made) path = "/tmp";
    }
    ~scratch_dir() {
        if (made) ::rmdir(path.c_str());
    }
};

const std::string& scratch() {
    static const scratch_dir dir;
    return dir.path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    try {
        const attn::io::checkpoint ck = attn::io::checkpoint::read(bytes, "fuzz.safetensors");
        std::uint64_t n = 0;
        for (int i = 0; i < 8; ++i) n |= std::uint64_t(data[i]) << (8 * i);
        check(ck, size - 8 - static_cast<std::size_t>(n));
    } catch (const attn::error&) {
    }
    if (size > 0 && data[0] == '{') {
        const std::string index = scratch() + "/fuzz.safetensors.index.json";
        std::ofstream(index, std::ios::binary) << bytes;
        try {
            const attn::io::checkpoint ck = attn::io::checkpoint::open(index);
            for (const auto& e : ck.tensors())
                if (!ck.find(e.name)) __builtin_trap();
        } catch (const attn::error&) {
        }
        ::unlink(index.c_str());
    }
    return 0;
}
