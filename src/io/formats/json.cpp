// The json output format (include/attn/io/formats.hpp): one JSON object (io/json.hpp).
#include "attn/io/formats.hpp"

#include "attn/io/json.hpp"

namespace attn::io {

namespace {
void write(std::ostream& out, const document& doc, const text_style& style, const table_options& table) {
    (void)table;
    write_json(out, doc, style);
}
}  // namespace

const output_format& json_format() {
    static const output_format f{"json", {"json"}, false, "", write, 0};
    return f;
}

}  // namespace attn::io
