// Half-precision output (docs/design.md §5.4): include/attn/pipeline/store.hpp.
#include "attn/pipeline/store.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

#include "attn/error.hpp"
#include "attn/stages.hpp"

namespace attn {

store_type parse_store_type(const std::string& name) {
    if (name == "float16") return store_type::float16;
    if (name == "bfloat16") return store_type::bfloat16;
    if (name == "computed") return store_type::computed;
    throw usage_error("store", "unknown type " + expected_got("float16 or bfloat16", name));
}

void store_matrices(io::document& doc, store_type type) {
    if (type == store_type::computed) return;
    for (named_array& t : doc.tensors) {
        const stage_kind k = tensor_kind(t.name);
        if (k != stage_kind::logits && k != stage_kind::scores && k != stage_kind::weights) continue;
        if (t.value.type != dtype::f4 && t.value.type != dtype::f8) continue;
        const std::size_t n = t.value.size();
        std::vector<std::uint16_t> bits(n);
        for (std::size_t i = 0; i < n; ++i) {
            const double v = t.value.value(i);
            bits[i] = type == store_type::float16 ? float_to_half(v) : float_to_bfloat16(v);
        }
        array a;
        a.type = type == store_type::float16 ? dtype::f2 : dtype::u2;
        a.shape = t.value.shape;
        std::vector<std::byte> bytes(n * sizeof(std::uint16_t));
        if (n) std::memcpy(bytes.data(), bits.data(), bytes.size());
        a.data = byte_buffer(std::move(bytes));
        t.value = std::move(a);
    }
    doc.meta["store"] = type == store_type::float16 ? "float16" : "bfloat16";
    if (type == store_type::bfloat16) doc.meta["store_bits"] = "uint16";
}

}  // namespace attn
