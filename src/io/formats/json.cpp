// The json output format (include/attn/io/formats.hpp): one JSON object (io/json.hpp).
#include "attn/io/formats.hpp"

#include "attn/io/json.hpp"
#include "attn/io/text_stream.hpp"

namespace attn::io {

namespace {
void write(std::ostream& out, const document& doc, const text_style& style, const table_options& table) {
    (void)table;
    write_json(out, doc, style);
}

/// A run's layers as one JSON document (json_stream).
class layers final : public layer_stream {
public:
    explicit layers(const layer_stream_setup& s) : json_(s.out, s.beside, s.count, s.style) {}
    void append(const document& layer) override { json_.append(layer); }
    void finish(const document& run) override { json_.finish(run); }

private:
    json_stream json_;
};

std::unique_ptr<layer_stream> stream(const layer_stream_setup& setup) { return std::make_unique<layers>(setup); }
}  // namespace

const output_format& json_format() {
    static const output_format f = [] {
        output_format json{"json", {"json"}, false, "", write, 0};
        json.layers = layer_streaming::spooled;
        json.stream = stream;
        json.several = several_inputs::array;
        json.listing = true;
        json.json_text = true;
        json.readable = true;
        return json;
    }();
    return f;
}

}  // namespace attn::io
