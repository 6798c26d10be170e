// libFuzzer target: the tokenizer.json reader on arbitrary text (scripts/fuzz.sh runs it):
// tokenizer::from_text, the whole pipeline attn tokenize, --text, --tokenizer and --vocab
// build. The input is a tokenizer.json, optionally followed by a NUL byte
// and a text: a tokenizer that loads encodes that text (or, without one, a few fixed
// texts), with and without special tokens, and labels its tokens. An attn::error is
// a clean rejection; a crash, a sanitizer report, a leak, an encoding that
// breaks its invariants (check_encoding.hpp) or any other exception is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "attn/error.hpp"
#include "attn/tokenizer/tokenizer.hpp"
#include "check_encoding.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const auto nul = input.find('\0');
    const std::string_view text = input.substr(0, nul);
    try {
        const auto tok = attn::tokenizer::from_text(text, "tokenizer.json");
        static constexpr std::string_view fixed[] = {"Hello world", " <|endoftext|>  café e\xcc\x81 日本 😀 123\r\n\t",
                                                      "[CLS] <s> </s> <unk> ▁a ##b", ""};
        const auto encode = [&](std::string_view t) {
            for (const bool special : {true, false}) {
                try {
                    attn_fuzz::check_encoding(tok, tok.encode(t, special), t);
                } catch (const attn::error&) {
                }
            }
        };
        if (nul != std::string_view::npos)
            encode(input.substr(nul + 1));
        else
            for (const auto t : fixed) encode(t);
    } catch (const attn::error&) {
    }
    return 0;
}
