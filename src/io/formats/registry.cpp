// The registry of output formats (include/attn/io/formats.hpp).
#include "attn/io/formats.hpp"

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "attn/error.hpp"
#include "attn/text.hpp"

namespace attn::io {

// Every `const output_format& <name>_format()` defined in a file of this folder, as the
// build lists them (formats.inc, attn_registry in cmake/floors.cmake): naming each one here
// makes the static archive keep its object (the linker takes only what something names), so
// a new format is its file alone.
#define ATTN_REGISTERED(function) const output_format& function();
#include "formats.inc"
#undef ATTN_REGISTERED

const std::vector<format>& output_formats() {
    static const std::vector<format> all = [] {
        std::vector<format> v{
#define ATTN_REGISTERED(function) &function(),
#include "formats.inc"
#undef ATTN_REGISTERED
        };
        // The order users read: each format's place (json first, the default), then its name.
        std::sort(v.begin(), v.end(), [](format a, format b) { return std::tie(a->order, a->name) < std::tie(b->order, b->name); });
        return v;
    }();
    return all;
}

std::string format_names() {
    return listed(format_names_where([](format) { return true; }));
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

std::vector<format> formats_where(bool (*keep)(format)) {
    std::vector<format> out;
    for (const format f : output_formats())
        if (keep(f)) out.push_back(f);
    return out;
}

std::vector<std::string> format_names_where(bool (*keep)(format), const std::string& first) {
    std::vector<std::string> names;
    for (const format f : formats_where(keep))
        if (f->name == first) names.push_back(f->name);
    for (const format f : formats_where(keep))
        if (f->name != first) names.push_back(f->name);
    return names;
}

format several_inputs_default() {
    for (const format f : output_formats())
        if (f->several == several_inputs::lines) return f;
    throw std::logic_error("no output format takes several inputs as lines");
}

}  // namespace attn::io
