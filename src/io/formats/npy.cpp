// The npy output format (include/attn/io/formats.hpp): the one tensor of a document (io/npy.hpp).
#include "attn/io/formats.hpp"

#include "attn/error.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/npz_stream.hpp"
#include "attn/text.hpp"

namespace attn::io {

namespace {
void write(std::ostream& out, const document& doc, const text_style& style, const table_options& table) {
    (void)style, (void)table;
    if (doc.tensors.size() != 1)
        throw usage_error("--format", "npy holds one tensor; pick one stage with --dump " +
                                          expected_got("1 stage", std::to_string(doc.tensors.size())));
    write_npy(out, doc.tensors.front().value);
}

/// A run's layers streamed into the file (npz_stream, one array as .npy): each tensor of the first layer,
/// with the number of layers as its leading axis.
class layers final : public layer_stream {
public:
    explicit layers(const layer_stream_setup& s) : npz_(s.out, arrays_of(s), true) {}
    void append(const document& layer) override {
        for (std::size_t i = 0; i < layer.tensors.size(); ++i) npz_.append(i, layer.tensors[i].value);
    }
    void finish(const document& run) override {
        (void)run;
        npz_.finish();
    }

private:
    static std::vector<streamed_array> arrays_of(const layer_stream_setup& s) {
        std::vector<streamed_array> arrays;
        for (const auto& t : s.first.tensors) {
            shape_t shape = t.value.shape;
            shape.insert(shape.begin(), s.count);
            arrays.push_back({t.name, t.value.type, std::move(shape)});
        }
        return arrays;
    }
    npz_stream npz_;
};

std::unique_ptr<layer_stream> stream(const layer_stream_setup& setup) { return std::make_unique<layers>(setup); }
}  // namespace

const output_format& npy_format() {
    static const output_format f = [] {
        output_format npy{"npy", {"npy"}, true, "", write, 3};
        npy.layers = layer_streaming::arrays;
        npy.stream = stream;
        npy.half_precision = true;
        npy.readable = true;
        return npy;
    }();
    return f;
}

}  // namespace attn::io
