// The npz output format (include/attn/io/formats.hpp): every tensor by name (io/npz.hpp).
#include "attn/io/formats.hpp"

#include "attn/io/npz.hpp"
#include "attn/io/writers.hpp"

namespace attn::io {

namespace {
void write(std::ostream& out, const document& doc, const text_style& style, const table_options& table) {
    (void)style, (void)table;
    write_npz(out, doc.tensors, context_members(doc));
}
}  // namespace

const output_format& npz_format() {
    static const output_format f{"npz", {"npz"}, true, "", write, 4};
    return f;
}

}  // namespace attn::io
