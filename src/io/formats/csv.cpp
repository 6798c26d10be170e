// The csv output format (include/attn/io/formats.hpp): one row per element (io/csv.hpp).
#include "attn/io/formats.hpp"

#include "attn/io/csv.hpp"
#include "attn/io/text_stream.hpp"

namespace attn::io {

namespace {
void write(std::ostream& out, const document& doc, const text_style& style, const table_options& table) {
    (void)table;
    write_csv(out, doc, style);
}

/// A run's layers as one CSV table (csv_stream), each row's `layer` the model's layer
/// from the layer's meta (what --layer N writes).
class layers final : public layer_stream {
public:
    explicit layers(const layer_stream_setup& s) : csv_(s.out, s.beside, s.count, s.style) {}
    void append(const document& layer) override { csv_.append(layer, layer.meta["model"]["layer"].get<std::size_t>()); }
    void finish(const document& run) override {
        (void)run;
        csv_.finish();
    }

private:
    csv_stream csv_;
};

std::unique_ptr<layer_stream> stream(const layer_stream_setup& setup) { return std::make_unique<layers>(setup); }
}  // namespace

const output_format& csv_format() {
    static const output_format f = [] {
        output_format csv{"csv", {"csv"}, false, "", write, 2};
        csv.layers = layer_streaming::spooled;
        csv.stream = stream;
        csv.several = several_inputs::table;
        return csv;
    }();
    return f;
}

}  // namespace attn::io
