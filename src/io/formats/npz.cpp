// The npz output format (include/attn/io/formats.hpp): every tensor by name (io/npz.hpp).
#include "attn/io/formats.hpp"

#include "attn/io/npz.hpp"
#include "attn/io/npz_stream.hpp"
#include "attn/io/writers.hpp"

namespace attn::io {

namespace {
void write(std::ostream& out, const document& doc, const text_style& style, const table_options& table) {
    (void)style, (void)table;
    write_npz(out, doc.tensors, context_members(doc));
}

/// A run's layers streamed into the file (npz_stream): each tensor of the first layer,
/// with the number of layers as its leading axis.
class layers final : public layer_stream {
public:
    explicit layers(const layer_stream_setup& s) : npz_(s.out, arrays_of(s), false) {}
    void append(const document& layer) override {
        for (std::size_t i = 0; i < layer.tensors.size(); ++i) npz_.append(i, layer.tensors[i].value);
    }
    void finish(const document& run) override { npz_.finish(context_members(run)); }

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

const output_format& npz_format() {
    static const output_format f = [] {
        output_format npz{"npz", {"npz"}, true, "", write, 4};
        npz.layers = layer_streaming::arrays;
        npz.stream = stream;
        npz.half_precision = true;
        npz.readable = true;
        return npz;
    }();
    return f;
}

}  // namespace attn::io
