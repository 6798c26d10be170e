// The csv output format (include/attn/io/formats.hpp): one row per element (io/csv.hpp).
#include "attn/io/formats.hpp"

#include "attn/io/csv.hpp"

namespace attn::io {

namespace {
void write(std::ostream& out, const document& doc, const text_style& style, const table_options& table) {
    (void)table;
    write_csv(out, doc, style);
}
}  // namespace

const output_format& csv_format() {
    static const output_format f{"csv", {"csv"}, false, "", write, 2};
    return f;
}

}  // namespace attn::io
