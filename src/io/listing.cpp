// list_arrays: arrays as stored, for inspect and compare.

#include "attn/io/listing.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <system_error>

#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/io/input.hpp"
#include "attn/io/limits.hpp"
#include "attn/io/json.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "attn/io/safetensors.hpp"

namespace attn::io {

namespace {

using json = nlohmann::ordered_json;

std::string order_name(char c) { return c == '<' ? "little" : c == '>' ? "big" : "n/a"; }

/// A JSON number, boolean or non-finite string as a 0-d array (bool, int64 or
/// float64, as read_json types lists); false for anything else.
bool scalar_array(const json& v, array& out) {
    out.shape = {};
    if (v.is_boolean()) {
        out.type = dtype::b1;
        out.data = {v.get<bool>() ? std::byte{1} : std::byte{0}};
        return true;
    }
    if (v.is_number_integer() && (v.is_number_unsigned() ? v.get<std::uint64_t>() <= INT64_MAX : true)) {
        const std::int64_t x = v.get<std::int64_t>();
        out.type = dtype::i8;
        out.data.resize(sizeof x);
        std::memcpy(out.data.data(), &x, sizeof x);
        return true;
    }
    if (v.is_number() || (v.is_string() && (v == "NaN" || v == "Infinity" || v == "-Infinity"))) {
        // read_json decodes the protobuf strings; a one-element list reuses it.
        const bundle b = read_json("[" + v.dump() + "]", "");
        out = b.arrays.front().value;
        out.shape = {};
        return true;
    }
    return false;
}

/// How deeply `node` nests lists along its first elements (a list of rank r has r).
std::size_t list_depth(const json& node) {
    std::size_t depth = 0;
    for (const json* n = &node; n->is_array() && !n->empty(); n = &n->front()) ++depth;
    return depth;
}

/// The arrays under `root` (an object), named by their dotted key paths. Nested objects
/// are visited with an explicit stack, in document order: a file of 100 000 nested
/// objects must not exhaust the call stack.
void walk_object(const json& root, const std::string& source, std::vector<listed_array>& out) {
    struct frame {
        const json* object;
        json::const_iterator next;
        std::string prefix;
    };
    std::vector<frame> stack{{&root, root.cbegin(), ""}};
    while (!stack.empty()) {
        frame& f = stack.back();
        if (f.next == f.object->cend()) {
            stack.pop_back();
            continue;
        }
        const std::string key = f.next.key();
        const json& value = f.next.value();
        ++f.next;
        const std::string name = f.prefix + key;
        const bool top = f.prefix.empty();
        if (top && (key == "meta" || key == "tokens" || key == "tokens_kv" || key == "words")) continue;
        if (value.is_object()) {
            stack.push_back({&value, value.cbegin(), name + "."});  // f is not used after this
            continue;
        }
        if (value.is_array()) {
            // Lists that are not numeric arrays (strings, ragged, deeper than rank 4) are
            // skipped, as compute skips unknown names; read_json reports them only for
            // names it needs. An array over --max-bytes is refused, as compute refuses it.
            if (list_depth(value) > 4) continue;
            try {
                bundle b = read_json(value.dump(), source + ":" + name);
                out.push_back({name, std::move(b.arrays.front().value), "n/a"});
            } catch (const format_error&) {
            } catch (const limit_error&) {
                throw;
            } catch (const value_error&) {
            }
            continue;
        }
        array a;
        if (!top && scalar_array(value, a)) out.push_back({name, std::move(a), "n/a"});
    }
}

/// Every tensor of a checkpoint that attn reads, loaded, in name order (a dtype load()
/// refuses, such as C64, is left out as JSON strings are).
std::vector<listed_array> checkpoint_arrays(const checkpoint& ck) {
    std::vector<listed_array> out;
    for (const auto& e : ck.tensors()) {
        try {
            array a = ck.load(e.name);
            const bool wide = dtype_size(a.type) > 1 && e.dtype.rfind("F8_", 0) != 0;
            out.push_back({e.name, std::move(a), wide ? "little" : "n/a"});
        } catch (const limit_error&) {
            throw;
        } catch (const value_error&) {
        }
    }
    return out;
}

}  // namespace

std::vector<listed_array> list_arrays(const std::string& path) {
    const std::string source = path == "-" ? "<stdin>" : path;
    if (is_checkpoint_file(path)) return checkpoint_arrays(checkpoint::open(path));
    std::string bytes = read_file(path);
    if (looks_like_safetensors(bytes)) return checkpoint_arrays(checkpoint::read(std::move(bytes), source));
    std::vector<listed_array> out;
    if (is_npy(bytes)) {
        npy_layout layout;
        array a = read_npy(bytes, source, &layout);
        out.push_back({"", std::move(a), order_name(layout.byte_order)});
        return out;
    }
    if (is_zip(bytes)) {
        std::vector<npy_layout> layouts;
        std::vector<named_array> arrays = read_npz(bytes, source, &layouts);
        for (std::size_t i = 0; i < arrays.size(); ++i)
            out.push_back({arrays[i].name, std::move(arrays[i].value), order_name(layouts[i].byte_order)});
        return out;
    }
    check_json_start(bytes, source);
    check_json_parse_bytes(bytes, source);
    check_json_depth(bytes, source);
    const std::optional<std::string> quoted = quote_bare_nonfinite(bytes);
    json doc;
    try {
        doc = json::parse(quoted ? *quoted : bytes);
    } catch (const json::exception&) {
        read_json(bytes, source);  // throws the reader's one-line message for the same error
        throw;
    }
    if (doc.is_array()) {
        bundle b = read_json(bytes, source);
        out.push_back({"", std::move(b.arrays.front().value), "n/a"});
        return out;
    }
    if (!doc.is_object()) read_json(bytes, source);  // throws "not an attn JSON input"
    walk_object(doc, source, out);
    return out;
}

namespace {

/// The bytes of a piece: 4 MiB, or less under a smaller --max-bytes (at least one element).
std::size_t piece_bytes() { return std::min<std::size_t>(std::size_t{4} << 20, max_array_bytes()); }

}  // namespace

bool read_arrays_in_pieces(const std::string& path, int passes, const std::function<void(const described_array&)>& begin,
                           const std::function<void(int, const array&)>& piece) {
    struct stat st {};
    if (path == "-" || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;  // list_arrays says why
    std::string head(std::size_t{1} << 16, '\0');
    std::size_t got = 0;
    // The first bytes: a .npy's magic and header, or a zip's.
    const auto read_at = [&](std::byte* out, std::size_t room) -> std::size_t {
        for (;;) {
            const ssize_t n = ::read(fd, out, room);
            if (n >= 0) return static_cast<std::size_t>(n);
            if (errno != EINTR) throw io_error(path, "cannot read (" + std::system_category().message(errno) + ")");
        }
    };
    struct closer {
        int fd;
        ~closer() { ::close(fd); }
    } close_it{fd};
    for (std::size_t n; got < head.size() && (n = read_at(reinterpret_cast<std::byte*>(head.data()) + got, head.size() - got)) > 0;) got += n;
    head.resize(got);
    if (is_zip(head)) {
        const auto result = read_npz_file_in_pieces(
            path, path, passes, [&](const std::string& name, const array& a, const npy_layout& l) { begin({name, a, order_name(l.byte_order)}); },
            piece, piece_bytes());
        return result && *result;
    }
    if (!is_npy(head)) return false;
    // A file whose size is not the header's (cut short, or with bytes after the data) is
    // read whole by list_arrays, which says what is wrong with it.
    const std::optional<std::size_t> total = check_npy_head(head, path, false);
    if (!total || *total != static_cast<std::size_t>(st.st_size)) return false;
    for (int pass = 0; pass < passes; ++pass) {
        if (pass > 0) {
            if (::lseek(fd, static_cast<off_t>(head.size()), SEEK_SET) < 0) return false;
        }
        array described;
        npy_layout layout;
        bool begun = pass > 0;
        const auto start = [&] {
            if (!begun) begin({"", described, order_name(layout.byte_order)});
            begun = true;
        };
        if (!read_npy_in_pieces(head, read_at, path, described, &layout, [&](const array& a) { start(), piece(pass, a); }, piece_bytes()))
            return false;
        start();  // an empty array has no piece
    }
    return true;
}

}  // namespace attn::io
