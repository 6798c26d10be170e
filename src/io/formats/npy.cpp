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

std::unique_ptr<layer_stream> stream(const layer_stream_setup& setup) { return array_layer_stream(setup, true); }
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
