// The registry of output formats (include/attn/io/formats.hpp).
#include "attn/io/formats.hpp"

#include "attn/error.hpp"
#include "attn/text.hpp"

namespace attn::io {

// One line per format, defined in its own file of this folder. A list rather than
// self-registering objects: attn_core is a static library, whose linker keeps only the
// objects something refers to, and the order here is the order users read.
const output_format& json_format();
const output_format& jsonl_format();
const output_format& csv_format();
const output_format& npy_format();
const output_format& npz_format();
const output_format& table_format();
const output_format& html_format();

const std::vector<format>& output_formats() {
    static const std::vector<format> all{&json_format(), &jsonl_format(), &csv_format(),  &npy_format(),
                                         &npz_format(),  &table_format(), &html_format()};
    return all;
}

std::string format_names() {
    std::string s;
    const auto& all = output_formats();
    for (std::size_t i = 0; i < all.size(); ++i) s += (i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + all[i]->name;
    return s;
}

std::string format_help() {
    std::string s;
    const auto& all = output_formats();
    for (std::size_t i = 0; i < all.size(); ++i) {
        s += (i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + all[i]->name;
        const std::string note = i == 0 ? "default" : all[i]->note;
        if (!note.empty()) s += " (" + note + ")";
    }
    return s;
}

std::string format_extensions() {
    std::string s;
    for (const format f : output_formats()) s += (s.empty() ? "." : ", .") + f->extensions.front();
    return s;
}

format parse_format(const std::string& name) {
    for (const format f : output_formats())
        if (f->name == name) return f;
    throw usage_error("--format", "unknown format " + expected_got(format_names(), name));
}

format format_from_path(const std::string& path) {
    const auto dot = path.find_last_of('.');
    const auto slash = path.find_last_of('/');
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return nullptr;
    const std::string ext = lower(path.substr(dot + 1));  // W.NPY is .npy
    for (const format f : output_formats())
        for (const std::string& e : f->extensions)
            if (e == ext) return f;
    return nullptr;
}

bool is_binary(format f) { return f->binary; }

}  // namespace attn::io
