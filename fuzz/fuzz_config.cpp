// libFuzzer target: model::parse_config on arbitrary config.json text, as given and with
// each --arch, then the family check (model::family) and layer 0's attention over a
// tiny in-memory checkpoint of every family, and config_from_tensors (scripts/fuzz.sh
// runs it). An attn::error is a clean rejection; a crash, a sanitizer report, a leak,
// an allocation over the RSS limit or any other exception is a bug.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/model/family.hpp"
#include "attn/model/registry.hpp"

namespace {

/// Tensors of a 2-layer model of each family (hidden 32, vocab 64, 32 positions, MLP 64,
/// 4 heads, llama with 2 kv heads and q/k/v biases), zeros, no name prefix.
class tiny_weights : public attn::model::weight_source {
public:
    tiny_weights() {
        const std::size_t E = 32, V = 64, P = 32, I = 64;
        s_["wte.weight"] = {V, E};
        s_["wpe.weight"] = {P, E};
        s_["embeddings.word_embeddings.weight"] = {V, E};
        s_["embeddings.position_embeddings.weight"] = {P, E};
        s_["embeddings.token_type_embeddings.weight"] = {2, E};
        s_["embeddings.LayerNorm.weight"] = {E};
        s_["embeddings.LayerNorm.bias"] = {E};
        s_["embed_tokens.weight"] = {V, E};
        for (int l = 0; l < 2; ++l) {
            const std::string h = "h." + std::to_string(l) + ".", b = "encoder.layer." + std::to_string(l) + ".",
                              m = "layers." + std::to_string(l) + ".";
            for (const char* n : {"ln_1", "ln_2"}) s_[h + n + ".weight"] = s_[h + n + ".bias"] = {E};
            s_[h + "attn.c_attn.weight"] = {E, 3 * E};
            s_[h + "attn.c_attn.bias"] = {3 * E};
            s_[h + "attn.c_proj.weight"] = {E, E};
            s_[h + "attn.c_proj.bias"] = {E};
            s_[h + "mlp.c_fc.weight"] = {E, I};
            for (const char* n : {"query", "key", "value"}) {
                s_[b + "attention.self." + n + ".weight"] = {E, E};
                s_[b + "attention.self." + n + ".bias"] = {E};
            }
            s_[b + "attention.output.dense.weight"] = {E, E};
            s_[b + "intermediate.dense.weight"] = {I, E};
            s_[m + "input_layernorm.weight"] = {E};
            s_[m + "self_attn.q_proj.weight"] = {E, E};
            s_[m + "self_attn.k_proj.weight"] = {E / 2, E};
            s_[m + "self_attn.v_proj.weight"] = {E / 2, E};
            s_[m + "self_attn.o_proj.weight"] = {E, E};
            s_[m + "self_attn.q_proj.bias"] = {E};
            s_[m + "self_attn.k_proj.bias"] = s_[m + "self_attn.v_proj.bias"] = {E / 2};
            s_[m + "mlp.gate_proj.weight"] = {I, E};
        }
    }
    const attn::shape_t* shape(const std::string& name) const override {
        const auto it = s_.find(name);
        return it == s_.end() ? nullptr : &it->second;
    }
    attn::array load(const std::string& name) const override {
        attn::array a;
        a.type = attn::dtype::f4;
        a.shape = s_.at(name);
        a.data.resize(a.size() * 4);
        return a;
    }

private:
    std::map<std::string, attn::shape_t> s_;
};

void check(const attn::model::config& c) {
    // What parse_config promises: positive sizes within the bound, GQA that divides, and
    // (llama) one sliding flag per layer.
    if (c.hidden == 0 || c.heads == 0 || c.kv_heads == 0 || c.head_dim == 0 || c.layers == 0) __builtin_trap();
    if (c.hidden > attn::model::max_config_count || c.layers > attn::model::max_config_count ||
        c.head_dim > attn::model::max_config_count || c.heads % c.kv_heads != 0 ||
        (c.family->name() == "llama" && c.sliding.size() != c.layers))
        __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const tiny_weights weights;
    const std::string text(reinterpret_cast<const char*>(data), size);
    std::vector<std::optional<attn::model::arch>> forcings{std::nullopt};
    for (const attn::model::family_spec* f : attn::model::families()) forcings.emplace_back(attn::model::arch(*f));
    for (const std::optional<attn::model::arch>& forced : forcings) {
        try {
            const attn::model::config c = attn::model::parse_config(text, "config.json", forced);
            check(c);
            const attn::model::family f(c, weights, "fuzz.safetensors");
            const attn::model::layer_attention a = f.attention(0);
            if (a.heads != c.heads || a.weights.empty()) __builtin_trap();
        } catch (const attn::error&) {
        }
    }
    // The stand-in for a missing config.json, with a head count from the input.
    for (const attn::model::family_spec* f : attn::model::families()) {
        try {
            check(attn::model::config_from_tensors(attn::model::arch(*f), weights, size % 9, size % 3, "fuzz.safetensors"));
        } catch (const attn::error&) {
        }
    }
    return 0;
}
