// libFuzzer target: io::read_npz on arbitrary bytes (scripts/fuzz.sh runs it).
// An attn::error is a clean rejection; a crash, a sanitizer report, a leak or any other
// exception is a bug. What is accepted must also survive write_npz → read_npz unchanged.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string_view>

#include "attn/error.hpp"
#include "attn/io/npz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    std::vector<attn::io::named_array> arrays;
    try {
        arrays = attn::io::read_npz(bytes, "fuzz.npz");
    } catch (const attn::error&) {
        return 0;
    }
    for (const auto& a : arrays)
        if (a.value.data.size() != a.value.size() * attn::dtype_size(a.value.type)) __builtin_trap();
    std::ostringstream out;
    try {
        attn::io::write_npz(out, arrays);
    } catch (const attn::io_error&) {
        // libzip refuses some member names a hostile archive can carry (e.g. duplicates).
        return 0;
    }
    const auto back = attn::io::read_npz(out.str(), "written.npz");
    if (back.size() != arrays.size()) __builtin_trap();
    for (std::size_t i = 0; i < back.size(); ++i)
        if (back[i].name != arrays[i].name || back[i].value.type != arrays[i].value.type ||
            back[i].value.shape != arrays[i].value.shape || back[i].value.data != arrays[i].value.data)
            __builtin_trap();
    return 0;
}
