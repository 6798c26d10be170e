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

std::unique_ptr<layer_stream> stream(const layer_stream_setup& setup) { return array_layer_stream(setup, false); }
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
