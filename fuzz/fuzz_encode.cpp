// libFuzzer target: the encoder (attn::tokenizer::tokenizer::encode) on arbitrary text,
// with the committed tokenizer fixtures (tests/fixtures/tokenizer/*.tokenizer.json: every
// normalizer, pre-tokenizer, model, post-processor and added-token flag attn supports).
// The first input byte picks the fixture, its low bit add_special_tokens; the rest is
// the text. Invalid UTF-8 is a clean rejection (attn::error); a crash, a sanitizer report,
// a leak, an encoding that breaks its invariants (check_encoding.hpp), an id the
// tokenizer does not know, two different encodings of one text or any other exception is a bug.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "attn/error.hpp"
#include "attn/tokenizer/tokenizer.hpp"
#include "check_encoding.hpp"

namespace {

std::vector<attn::tokenizer::tokenizer> load_fixtures() {
    const std::string dir = ATTN_FUZZ_TOKENIZER_FIXTURES;
    std::ifstream list(dir + "/small_tokenizers.txt");
    std::vector<attn::tokenizer::tokenizer> out;
    for (std::string name; std::getline(list, name);)
        if (!name.empty()) out.push_back(attn::tokenizer::from_file(dir + "/" + name + ".tokenizer.json"));
    if (out.empty()) __builtin_trap();  // the fixtures are missing: nothing would be fuzzed
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const auto tokenizers = load_fixtures();
    if (size == 0) return 0;
    const auto& tok = tokenizers[(data[0] >> 1) % tokenizers.size()];
    const bool special = data[0] & 1;
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    try {
        const auto e = tok.encode(text, special);
        attn_fuzz::check_encoding(tok, e, text);
        for (std::size_t k = 0; k < e.ids.size(); ++k)
            if (!tok.id_to_token(e.ids[k])) __builtin_trap();
        if (tok.encode(text, special).ids != e.ids) __builtin_trap();
    } catch (const attn::error&) {
    }
    return 0;
}
