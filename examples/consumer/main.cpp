// Computes causal self-attention on a tiny input through the installed library
// (attn::compute) and prints the softmax weights, one row per query.
#include <cstdio>
#include <vector>

#include "attn/pipeline.hpp"
#include "attn/error.hpp"

int main() {
    // X is (T, D) = (3, 2): self-attention, Q = K = V = X.
    const std::vector<double> x{1.0, 0.0,
                                0.0, 1.0,
                                1.0, 1.0};
    std::vector<attn::named_array> inputs;
    inputs.push_back({"x", attn::array::from<double>({3, 2}, x.data())});

    attn::pipeline_options options;
    options.attention.mask.causal = true;
    options.dump = {"weights"};
    try {
        const attn::io::document doc = attn::compute(std::move(inputs), {}, options);
        const attn::array& w = doc.tensors.at(0).value;  // (Tq, Tk) = (3, 3)
        std::printf("attn %s: %s %s\n", ATTN_VERSION, doc.tensors.at(0).name.c_str(),
                    attn::shape_string(w.shape).c_str());
        for (std::size_t i = 0; i < w.shape[0]; ++i) {
            for (std::size_t j = 0; j < w.shape[1]; ++j) std::printf(j ? " %.4f" : "%.4f", w.value(i * w.shape[1] + j));
            std::printf("\n");
        }
    } catch (const attn::error& e) {
        std::fprintf(stderr, "attn_consumer: %s\n", e.what());
        return 1;
    }
    return 0;
}
