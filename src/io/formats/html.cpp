// The html output format (include/attn/io/formats.hpp): the page of attn view (io/html.hpp).
#include "attn/io/formats.hpp"

#include "attn/io/html.hpp"

namespace attn::io {

namespace {
void write(std::ostream& out, const document& doc, const text_style& style, const table_options& table) {
    (void)style, (void)table;
    write_html(out, doc, doc.input.empty() ? "attn compute" : doc.input);
}
}  // namespace

const output_format& html_format() {
    static const output_format f{"html", {"html", "htm"}, false, "the page of attn view", write, 6};
    return f;
}

}  // namespace attn::io
