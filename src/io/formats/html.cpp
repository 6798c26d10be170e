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
    static const output_format f = [] {
        output_format html{"html", {"html", "htm"}, false, "the page of attn view", write, 6};
        html.layers = layer_streaming::page;
        html.page = true;
        html.whole_document = false;  // the page shows attention's stages, not any document
        return html;
    }();
    return f;
}

}  // namespace attn::io
