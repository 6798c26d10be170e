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
    static const output_format f{"jsonl", {"jsonl"}, false, "", write, 1};
    return f;
}

}  // namespace attn::io
