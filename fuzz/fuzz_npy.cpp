// libFuzzer target: io::read_npy on arbitrary bytes (scripts/fuzz.sh runs it).
// An attn::error is a clean rejection; a crash, a sanitizer report, a leak or any other
// exception is a bug. What is accepted must also survive write_npy → read_npy unchanged.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string_view>

#include "attn/error.hpp"
#include "attn/io/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    attn::array a;
    try {
        a = attn::io::read_npy(bytes, "fuzz.npy");
    } catch (const attn::error&) {
        return 0;
    }
    if (a.data.size() != a.size() * attn::dtype_size(a.type)) __builtin_trap();
    double sum = 0;
    for (std::size_t i = 0; i < a.size(); ++i) sum += a.value(i);
    (void)sum;
    std::ostringstream out;
    attn::io::write_npy(out, a);
    const attn::array back = attn::io::read_npy(out.str(), "written.npy");
    if (back.type != a.type || back.shape != a.shape || back.data != a.data) __builtin_trap();
    return 0;
}
