// libFuzzer target: io::read_json on arbitrary text (scripts/fuzz.sh runs it).
// An attn::error is a clean rejection; a crash, a sanitizer report, a leak or any other
// exception is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "attn/error.hpp"
#include "attn/io/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const attn::io::bundle b = attn::io::read_json(text, "fuzz.json");
        for (const auto& a : b.arrays) {
            if (a.value.data.size() != a.value.size() * attn::dtype_size(a.value.type)) __builtin_trap();
            double sum = 0;
            for (std::size_t i = 0; i < a.value.size(); ++i) sum += a.value.value(i);
            (void)sum;
        }
    } catch (const attn::error&) {
    }
    return 0;
}
