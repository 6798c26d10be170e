// .npz archives through libzip: the reader opens a zip source over the caller's bytes or
// over a file (read as needed), the writer builds the archive in a libzip buffer source.

#include "attn/io/npz.hpp"

#include <zip.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>

#include "attn/error.hpp"
#include "attn/io/limits.hpp"
#include "attn/io/npy.hpp"
#include "attn/text.hpp"

namespace attn::io {
namespace {

constexpr std::string_view npy_suffix = ".npy";
// Deflate cannot expand data by more than about 1032:1, so a member claiming more than
// that (plus slack for tiny members) is lying about its size; reading it would only be
// a way to exhaust memory.
constexpr std::uint64_t max_deflate_ratio = 1032;
constexpr std::uint64_t size_slack = 1 << 16;
constexpr std::size_t read_chunk = 1 << 20;
// Enough for every .npy header NumPy writes (version 1.0 headers are < 64 KiB).
constexpr std::size_t head_chunk = (1 << 16) + 16;

struct archive_closer {
    void operator()(zip_t* z) const { zip_discard(z); }
};
struct file_closer {
    void operator()(zip_file_t* f) const { zip_fclose(f); }
};
using archive_ptr = std::unique_ptr<zip_t, archive_closer>;
using file_ptr = std::unique_ptr<zip_file_t, file_closer>;

/// libzip messages start with a capital ("Not a zip archive"); ours are lower-case.
std::string lower_first(std::string s) {
    // ...but acronyms ("CRC error") stay as they are.
    if (s.size() > 1 && s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'a' && s[1] <= 'z') s[0] = static_cast<char>(s[0] - 'A' + 'a');
    return s;
}

std::string zip_message(zip_error_t* error) { return lower_first(zip_error_strerror(error)); }

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

/// A member opened for reading, within its declared size: `limit` bytes at most (the
/// stated size, or what deflate could give from the compressed size), narrowed to the
/// array's size once its .npy head is read.
struct member_stream {
    std::string source;
    file_ptr file;
    std::uint64_t limit = 0;
    std::uint64_t pos = 0;  // bytes read so far

    /// Up to `want` bytes into `out`; 0 at the end. Throws format_error.
    std::size_t read_some(void* out, std::uint64_t want) {
        const zip_int64_t n = zip_fread(file.get(), out, want);
        if (n < 0) throw format_error(source, "cannot read member (" + lower_first(zip_file_strerror(file.get())) + ")");
        pos += static_cast<std::uint64_t>(n);
        return static_cast<std::size_t>(n);
    }
    format_error larger_than_declared() const {
        return format_error(source, "member larger than declared " + expected_got(std::to_string(limit) + " bytes", "more"));
    }
    /// The head: the member's first bytes until it holds head_chunk of them or ends.
    std::string head() {
        std::string data(head_chunk, '\0');
        std::size_t got = 0;
        while (got < data.size()) {
            const std::size_t n = read_some(data.data() + got, std::min<std::uint64_t>(data.size() - got, limit + 1 - got));
            if (n == 0) break;
            got += n;
            if (got > limit) throw larger_than_declared();
        }
        data.resize(got);
        return data;
    }
    /// read_npy_streamed's read_rest: the bytes after those read, up to `limit`; at the
    /// limit, one more byte read must find the end.
    std::size_t rest(std::byte* out, std::size_t room) {
        if (pos >= limit) {
            char extra;
            if (read_some(&extra, 1) != 0) throw larger_than_declared();
            return 0;
        }
        return read_some(out, std::min<std::uint64_t>(room, limit - pos));
    }
};

/// Opens member `index`: a member whose stated size deflate could not give from its
/// compressed size (a zip bomb) is refused first. Throws format_error.
member_stream open_member(zip_t* z, zip_uint64_t index, const zip_stat_t& st, const std::string& source) {
    if ((st.valid & ZIP_STAT_SIZE) && (st.valid & ZIP_STAT_COMP_SIZE) &&
        st.size > st.comp_size * max_deflate_ratio + size_slack)
        throw format_error(source, "implausible member size " +
                                       expected_got("at most " + std::to_string(st.comp_size * max_deflate_ratio +
                                                                                size_slack) +
                                                        " bytes",
                                                    std::to_string(st.size)));
    member_stream m;
    m.source = source;
    m.file.reset(zip_fopen_index(z, index, 0));
    if (!m.file) throw format_error(source, "cannot read member (" + zip_message(zip_get_error(z)) + ")");
    m.limit = (st.valid & ZIP_STAT_SIZE) ? st.size
              : (st.valid & ZIP_STAT_COMP_SIZE) ? st.comp_size * max_deflate_ratio + size_slack
                                                : 0;
    return m;
}

/// Narrows `m`'s limit to the size the .npy `head` declares, after refusing a member whose
/// stated size is larger (a zip bomb behind a small array). False for a head that is not
/// a well-formed .npy header: the caller reads it whole, for read_npy to say why.
/// `limited`: refuse an array over max_array_bytes() (value_error), as read_npy does.
bool narrow_to_array(member_stream& m, const std::string& head, const zip_stat_t& st, bool limited) {
    if (!is_npy(head)) return false;
    const std::optional<std::size_t> total = check_npy_head(head, m.source, limited);
    if (!total) return false;
    if ((st.valid & ZIP_STAT_SIZE) && st.size > *total)
        throw format_error(m.source, "member larger than its array " +
                                         expected_got(std::to_string(*total) + " bytes", std::to_string(st.size)));
    m.limit = std::min<std::uint64_t>(m.limit, *total);
    return head.size() <= m.limit;
}

/// Reads a member's array, never holding more than its (checked) declared size. The .npy
/// header comes first, alone: an array over --max-bytes, or a member whose stated size
/// is larger than its header says the array is (a zip bomb behind a small array), is
/// refused before the data is inflated. A well-formed member is then inflated straight
/// into its array's buffer (read_npy_streamed), so each byte is held once; anything else
/// is read whole, for read_npy to say what is wrong with it.
void read_rest_whole(member_stream& m, std::string& data);

array read_member(zip_t* z, zip_uint64_t index, const zip_stat_t& st, const std::string& source, npy_layout* layout) {
    member_stream m = open_member(z, index, st, source);
    std::string data = m.head();
    if (narrow_to_array(m, data, st, true)) {
        // The rest goes straight into the array.
        array a = read_npy_streamed(data, [&](std::byte* out, std::size_t room) { return m.rest(out, room); }, source, layout);
        // The array is whole: the member must end here.
        if (m.rest(nullptr, 0) != 0) throw m.larger_than_declared();
        return a;
    }
    read_rest_whole(m, data);
    return read_npy(data, source, layout);
}

/// Reads the rest of member `m` after `data` (its head) into `data`, within its declared
/// size. Throws format_error.
void read_rest_whole(member_stream& m, std::string& data) {
    if (data.size() > m.limit) throw m.larger_than_declared();
    for (;;) {
        const std::size_t old = data.size();
        // One byte beyond the declared size is requested so that a member with more
        // data than it declares is noticed.
        const std::uint64_t want = std::min<std::uint64_t>(read_chunk, m.limit + 1 - old);
        data.resize(old + static_cast<std::size_t>(want));
        const std::size_t n = m.read_some(data.data() + old, want);
        data.resize(old + n);
        if (n == 0) break;
        if (data.size() > m.limit) throw m.larger_than_declared();
    }
}

/// read_npy_in_pieces of member `index`, with read_member's checks; false when the member
/// is not a well-formed .npy as far as its head shows, or is Fortran-ordered: nothing is
/// handed to piece(), and the caller reads it whole.
bool read_member_in_pieces(zip_t* z, zip_uint64_t index, const zip_stat_t& st, const std::string& source, array& described,
                           npy_layout* layout, const std::function<void(const array&)>& piece, std::size_t piece_bytes) {
    member_stream m = open_member(z, index, st, source);
    const std::string head = m.head();
    if (!narrow_to_array(m, head, st, false)) return false;
    if (!read_npy_in_pieces(head, [&](std::byte* out, std::size_t room) { return m.rest(out, room); }, source, described, layout, piece,
                            piece_bytes))
        return false;
    if (m.rest(nullptr, 0) != 0) throw m.larger_than_declared();
    return true;
}

}  // namespace

bool is_zip(std::string_view bytes) {
    const std::string_view head = bytes.substr(0, 4);
    return head == std::string_view("PK\x03\x04", 4) || head == std::string_view("PK\x05\x06", 4);
}

namespace {

// libzip's zip_open_from_source fills two static command bitmaps on its first call,
// without a lock: batch workers opening their first .npz at once race on them (helgrind,
// scripts/check_races.sh). The first call is made here, on an empty archive in memory,
// before main starts any thread.
[[maybe_unused]] const bool zip_statics_filled = [] {
    zip_source_t* src = zip_source_buffer_create(nullptr, 0, 0, nullptr);
    if (!src) return false;
    if (zip_t* z = zip_open_from_source(src, ZIP_RDONLY, nullptr)) zip_discard(z);  // frees src
    else zip_source_free(src);
    return true;
}();

/// The archive in `bytes`. Throws format_error for a broken one.
archive_ptr open_buffer(std::string_view bytes, const std::string& source) {
    // libzip opens zero bytes as a new, empty archive; a file has to be one already.
    if (!is_zip(bytes)) throw format_error(source, "not a valid .npz archive (not a zip archive)");
    zip_error_t error;
    zip_error_init(&error);
    zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &error);
    if (!src) {
        const std::string msg = zip_message(&error);
        zip_error_fini(&error);
        throw format_error(source, "not a valid .npz archive (" + msg + ")");
    }
    archive_ptr z(zip_open_from_source(src, ZIP_RDONLY, &error));
    if (!z) {
        zip_source_free(src);
        const std::string msg = zip_message(&error);
        zip_error_fini(&error);
        throw format_error(source, "not a valid .npz archive (" + msg + ")");
    }
    zip_error_fini(&error);
    return z;
}

/// The archive in the file at `path`, read from the file as needed; null when libzip
/// cannot open it (the caller then reads it whole, and open_buffer says why).
archive_ptr open_file(const std::string& path) {
    zip_error_t error;
    zip_error_init(&error);
    zip_source_t* src = zip_source_file_create(path.c_str(), 0, -1, &error);
    zip_error_fini(&error);
    if (!src) return nullptr;
    archive_ptr z(zip_open_from_source(src, ZIP_RDONLY, nullptr));
    if (!z) zip_source_free(src);
    return z;
}

/// Calls visit(archive, index, stat, name) for each ".npy" member of the archive, in
/// archive order, with the suffix taken off the name. Throws format_error.
template <class Visit>
void for_each_member(zip_t* z, const std::string& source, Visit&& visit) {
    const zip_int64_t count = zip_get_num_entries(z, 0);
    for (zip_int64_t i = 0; i < count; ++i) {
        const auto index = static_cast<zip_uint64_t>(i);
        zip_stat_t st;
        zip_stat_init(&st);
        if (zip_stat_index(z, index, 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME))
            throw format_error(source, "not a valid .npz archive (" + zip_message(zip_get_error(z)) + ")");
        const std::string member = st.name;
        // np.load returns members without the suffix as raw bytes; they hold no array.
        if (!ends_with(member, npy_suffix)) continue;
        visit(z, index, st, member.substr(0, member.size() - npy_suffix.size()));
    }
}

bool has_member(zip_t* z, const std::function<bool(const std::string&)>& match) {
    const zip_int64_t count = zip_get_num_entries(z, 0);
    for (zip_int64_t i = 0; i < count; ++i)
        if (const char* name = zip_get_name(z, static_cast<zip_uint64_t>(i), 0); name && match(name)) return true;
    return false;
}

/// torch.save (since 1.6) writes a zip too, of "<name>/data.pkl" and raw storages.
bool is_torch_member(const std::string& m) {
    return m == "data.pkl" || (m.size() > 9 && m.compare(m.size() - 9, 9, "/data.pkl") == 0);
}

std::vector<std::string> member_names(zip_t* z, const std::string& source) {
    std::vector<std::string> names;
    for_each_member(z, source, [&](zip_t*, zip_uint64_t, const zip_stat_t&, const std::string& name) {
        names.push_back(name);
    });
    return names;
}

std::vector<named_array> read_members(zip_t* z, const std::string& source, std::vector<npy_layout>* stored,
                                      const std::function<bool(const std::string&)>& wanted) {
    std::vector<named_array> arrays;
    std::size_t loaded = 0;
    for_each_member(z, source, [&](zip_t* archive, zip_uint64_t index, const zip_stat_t& st, const std::string& name) {
        if (is_context_member(lower(name))) return;  // read_npz_context's
        if (wanted && !wanted(name)) return;
        const std::string member_source = source + ":" + name;
        npy_layout layout;
        arrays.push_back({name, read_member(archive, index, st, member_source, &layout)});
        // --max-bytes bounds the arrays read from one file together, not only each one.
        loaded += arrays.back().value.data.size();
        check_file_bytes(loaded, source);
        if (stored) stored->push_back(layout);
    });
    return arrays;
}

}  // namespace

bool zip_has_member(std::string_view bytes,
                    const std::function<bool(const std::string&)>& match) {
    if (!is_zip(bytes)) return false;
    zip_error_t error;
    zip_error_init(&error);
    zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &error);
    zip_error_fini(&error);
    if (!src) return false;
    archive_ptr z(zip_open_from_source(src, ZIP_RDONLY, nullptr));
    if (!z) {
        zip_source_free(src);
        return false;  // read_npz says what is wrong with it
    }
    return has_member(z.get(), match);
}

std::vector<std::string> npz_names(std::string_view bytes, const std::string& source) {
    return member_names(open_buffer(bytes, source).get(), source);
}

bool is_context_member(const std::string& name) {
    return name == "tokens" || name == "tokens_kv" || name == "words" || name == "meta";
}

namespace {

npz_context read_context(zip_t* z, const std::string& source) {
    npz_context c;
    std::size_t loaded = 0;
    for_each_member(z, source, [&](zip_t* archive, zip_uint64_t index, const zip_stat_t& st, const std::string& name) {
        const std::string key = lower(name);
        if (!is_context_member(key)) return;
        const std::string member_source = source + ":" + name;
        member_stream m = open_member(archive, index, st, member_source);
        std::string data = m.head();
        read_rest_whole(m, data);
        loaded += data.size();
        check_file_bytes(loaded, source);
        text_array t;
        try {
            t = read_text_npy(data, member_source);
        } catch (const value_error&) {
            return;  // not attn's context (a numeric array of that name): not labels
        }
        if (key == "meta") {
            if (!t.shape.empty() || t.values.size() != 1)
                throw value_error(member_source, "not one JSON text " + expected_got("a 0-d unicode array", "shape " + shape_string(t.shape)));
            c.meta = std::move(t.values.front());
            return;
        }
        if (t.shape.size() != 1 && t.shape.size() != 2)
            throw value_error(member_source, "not labels " + expected_got("(T,) or (B, T)", shape_string(t.shape)));
        (key == "tokens" ? c.tokens : key == "words" ? c.words : c.tokens_kv) = std::move(t);
    });
    return c;
}

}  // namespace

npz_context read_npz_context(std::string_view bytes, const std::string& source) {
    return read_context(open_buffer(bytes, source).get(), source);
}

std::optional<npz_context> read_npz_context_file(const std::string& path, const std::string& source) {
    archive_ptr z = open_file(path);
    if (!z) return std::nullopt;
    return read_context(z.get(), source);
}

std::vector<named_array> read_npz(std::string_view bytes, const std::string& source,
                                  std::vector<npy_layout>* stored,
                                  const std::function<bool(const std::string&)>& wanted) {
    if (zip_has_member(bytes, is_torch_member)) throw format_error(source, torch_archive_message);
    return read_members(open_buffer(bytes, source).get(), source, stored, wanted);
}

std::optional<std::vector<named_array>> read_npz_file(const std::string& path, const std::string& source,
                                                      std::vector<npy_layout>* stored,
                                                      const std::function<bool(const std::string&)>& wanted,
                                                      std::vector<std::string>* names) {
    archive_ptr z = open_file(path);
    if (!z) return std::nullopt;
    // As read_bundle did with the whole file: the names first, then the torch check.
    std::vector<std::string> all = member_names(z.get(), source);
    if (has_member(z.get(), is_torch_member)) throw format_error(source, torch_archive_message);
    if (names) *names = std::move(all);
    return read_members(z.get(), source, stored, wanted);
}

std::optional<bool> read_npz_file_in_pieces(const std::string& path, const std::string& source, int passes,
                                            const std::function<void(const std::string&, const array&, const npy_layout&)>& begin,
                                            const std::function<void(int, const array&)>& piece, std::size_t piece_bytes) {
    archive_ptr z = open_file(path);
    if (!z) return std::nullopt;
    if (has_member(z.get(), is_torch_member)) throw format_error(source, torch_archive_message);
    bool whole = true;
    for_each_member(z.get(), source, [&](zip_t* archive, zip_uint64_t index, const zip_stat_t& st, const std::string& name) {
        if (!whole || is_context_member(lower(name))) return;
        const std::string member_source = source + ":" + name;
        for (int pass = 0; pass < passes && whole; ++pass) {
            array described;
            npy_layout layout;
            bool begun = false;
            whole = read_member_in_pieces(archive, index, st, member_source, described, &layout, [&](const array& a) {
                if (pass == 0 && !begun) begin(name, described, layout), begun = true;
                piece(pass, a);
            }, piece_bytes);
            if (whole && pass == 0 && !begun) begin(name, described, layout);  // no data: an empty array
        }
    });
    return whole;
}

namespace {

/// The refusal of a failed write to the output stream, with the reason the system gave
/// (`err`, the errno right after the write; 0 when the stream has no descriptor).
[[noreturn]] void write_failed(int err) {
    throw io_error("", err ? "cannot write .npz data (" + std::system_category().message(err) + ")"
                           : std::string("cannot write .npz data"));
}

}  // namespace

void write_npz(std::ostream& out, const std::vector<named_array>& arrays, const std::vector<npz_member>& extra) {
    if (arrays.empty() && extra.empty()) {
        // libzip removes an archive left with no entries; np.savez() writes a lone
        // end-of-central-directory record, and so do we.
        const std::string empty = std::string("PK\x05\x06", 4) + std::string(18, '\0');
        errno = 0;
        out.write(empty.data(), static_cast<std::streamsize>(empty.size()));
        if (!out) write_failed(errno);
        return;
    }
    // Each member is two fragments, the .npy header and the array's own bytes, so the
    // data is not copied; libzip keeps the pointers until zip_close, so headers live here.
    std::vector<std::string> headers;
    headers.reserve(arrays.size());
    for (const auto& a : arrays) {
        std::ostringstream s;
        write_npy_header(s, a.value);
        headers.push_back(std::move(s).str());
    }

    zip_error_t error;
    zip_error_init(&error);
    zip_source_t* buffer = zip_source_buffer_create(nullptr, 0, 0, &error);
    if (!buffer) throw io_error("", "cannot create .npz archive (" + zip_message(&error) + ")");
    zip_source_keep(buffer);  // the archive's close would free it; we read the result from it
    std::unique_ptr<zip_source_t, decltype(&zip_source_free)> keep(buffer, &zip_source_free);
    archive_ptr z(zip_open_from_source(buffer, ZIP_TRUNCATE, &error));
    if (!z) {
        const std::string msg = zip_message(&error);
        zip_error_fini(&error);
        throw io_error("", "cannot create .npz archive (" + msg + ")");
    }
    zip_error_fini(&error);

    auto fail = [&](zip_t* archive) {
        throw io_error("", "cannot create .npz archive (" + zip_message(zip_get_error(archive)) + ")");
    };
    const std::size_t count = arrays.size() + extra.size();
    for (std::size_t i = 0; i < count; ++i) {
        const bool tail = i >= arrays.size();
        const npz_member* m = tail ? &extra[i - arrays.size()] : nullptr;
        const zip_buffer_fragment_t parts[2] = {
            tail ? zip_buffer_fragment_t{reinterpret_cast<zip_uint8_t*>(const_cast<char*>(m->npy.data())), m->npy.size()}
                 : zip_buffer_fragment_t{reinterpret_cast<zip_uint8_t*>(headers[i].data()), headers[i].size()},
            tail ? zip_buffer_fragment_t{nullptr, 0}
                 : zip_buffer_fragment_t{reinterpret_cast<zip_uint8_t*>(const_cast<std::byte*>(arrays[i].value.data.data())),
                                         arrays[i].value.data.size()}};
        zip_source_t* member = zip_source_buffer_fragment(z.get(), parts, parts[1].length ? 2 : 1, 0);
        if (!member) fail(z.get());
        const std::string name = (tail ? m->name : arrays[i].name) + std::string(npy_suffix);
        const zip_int64_t index = zip_file_add(z.get(), name.c_str(), member, ZIP_FL_ENC_UTF_8);
        if (index < 0) {
            zip_source_free(member);
            fail(z.get());
        }
        const auto idx = static_cast<zip_uint64_t>(index);
        // Stored, like np.savez; a fixed time stamp makes the output reproducible.
        if (zip_set_file_compression(z.get(), idx, ZIP_CM_STORE, 0) != 0 ||
            zip_file_set_mtime(z.get(), idx, 315532800 /* 1980-01-01, the DOS epoch */, 0) != 0)
            fail(z.get());
    }
    if (zip_close(z.get()) != 0) fail(z.get());
    z.release();  // zip_close freed it

    if (zip_source_open(buffer) != 0)
        throw io_error("", "cannot read .npz archive back (" + zip_message(zip_source_error(buffer)) + ")");
    std::vector<char> chunk(1 << 20);
    for (;;) {
        const zip_int64_t n = zip_source_read(buffer, chunk.data(), chunk.size());
        if (n < 0) {
            zip_source_close(buffer);
            throw io_error("", "cannot read .npz archive back (" + zip_message(zip_source_error(buffer)) + ")");
        }
        if (n == 0) break;
        errno = 0;
        out.write(chunk.data(), static_cast<std::streamsize>(n));
        if (!out) {
            const int err = errno;  // before zip_source_close can change it
            zip_source_close(buffer);
            write_failed(err);
        }
    }
    zip_source_close(buffer);
}

}  // namespace attn::io
