// The jsonl output format (include/attn/io/formats.hpp): one JSON object on one line (io/json.hpp).
#include "attn/io/formats.hpp"

#include "attn/io/json.hpp"

namespace attn::io {

namespace {
void write(std::ostream& out, const document& doc, const text_style& style, const table_options& table) {
    (void)table;
    write_jsonl(out, doc, style);
}
}  // namespace

const output_format& jsonl_format() {
    static const output_format f = [] {
        output_format jsonl{"jsonl", {"jsonl"}, false, "", write, 1};
        jsonl.layers = layer_streaming::lines;
        jsonl.several = several_inputs::lines;
        jsonl.whole_document = false;  // one layer a line
        jsonl.json_text = true;
        return jsonl;
    }();
    return f;
}

}  // namespace attn::io
