// The table output format (include/attn/io/formats.hpp): aligned matrices for a terminal (io/table.hpp).
#include "attn/io/formats.hpp"

#include "attn/io/table.hpp"

namespace attn::io {

namespace {
void write(std::ostream& out, const document& doc, const text_style& style, const table_options& table) {
    write_table(out, doc, style, table);
}
}  // namespace

const output_format& table_format() {
    static const output_format f = [] {
        output_format table{"table", {"txt"}, false, "", write, 5};
        table.terminal = true;
        table.listing = true;
        return table;
    }();
    return f;
}

}  // namespace attn::io
