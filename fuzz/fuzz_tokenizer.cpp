// libFuzzer target: the tokenizer.json reader (io::vocab_labels, what --vocab reads) on
// arbitrary text (scripts/fuzz.sh runs it). An attn::error is a clean rejection; a crash,
// a sanitizer report, a leak, a table larger than the text implies or any other exception
// is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "attn/error.hpp"
#include "attn/io/vocab.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const auto labels = attn::io::vocab_labels(text, "tokenizer.json");
        // Ids are bounded by the tokens the text names, each of which takes bytes of it.
        if (labels.size() > size) __builtin_trap();
        std::size_t bytes = 0;
        for (const auto& l : labels) bytes += l.size();
        (void)bytes;
    } catch (const attn::error&) {
    }
    return 0;
}
