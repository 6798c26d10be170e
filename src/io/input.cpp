// Input files: read whole, recognised by content, named per DESIGN §2.

#include "attn/io/input.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <cstdio>

#include "attn/error.hpp"
#include "attn/io/json.hpp"
#include "attn/io/limits.hpp"
#include "attn/io/npy.hpp"

namespace attn::io {

/// The names attn looks for in a bundle (DESIGN §2).
constexpr std::string_view attn_names[] = {
    "q",        "k",          "v",           "x",           "x_kv",         "w_q",       "w_k",
    "w_v",      "b_q",        "b_k",         "b_v",         "w_o",          "b_o",       "in_proj_weight",
    "in_proj_bias", "attn_mask", "key_padding_mask", "lengths", "token_ids", "past_key", "past_value",
    "tokens"};

bool is_attn_name(const std::string& name) {
    for (auto n : attn_names)
        if (n == name) return true;
    return false;
}

namespace {


std::string lower(std::string s) {
    for (auto& c : s)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return s;
}

std::string display_name(const std::string& path) { return path == "-" ? "<stdin>" : path; }

/// Reads a file without renaming anything: names lower-cased, in file order.
bundle read_bundle(const std::string& path) {
    const std::string source = display_name(path);
    const std::string bytes = read_file(path);
    bundle b;
    if (is_npy(bytes)) {
        b.arrays.push_back({"x", read_npy(bytes, source)});
    } else if (is_zip(bytes)) {
        b.arrays = read_npz(bytes, source);
    } else if (bytes.find_first_not_of(" \t\r\n") == std::string::npos) {
        throw format_error(source, "empty input " + expected_got(".npy, .npz or JSON", bytes.empty() ? "0 bytes" : "only whitespace"));
    } else {
        b = read_json(bytes, source);
    }
    for (auto& a : b.arrays) a.name = lower(a.name);
    return b;
}

/// A bundle whose only array has a name attn does not know (np.savez's "arr_0", a
/// JSON {"data": ...}) holds X.
void apply_naming_rule(bundle& b) {
    if (b.arrays.size() == 1 && !is_attn_name(b.arrays.front().name)) b.arrays.front().name = "x";
}

std::string name_list(const bundle& b) {
    std::string s;
    for (const auto& a : b.arrays) s += (s.empty() ? "" : ", ") + a.name;
    return s.empty() ? "none" : s;
}

/// The largest input file read_file accepts: max_array_bytes() plus room for headers.
std::size_t max_file_bytes() {
    const std::size_t max = max_array_bytes();
    return max > SIZE_MAX - file_overhead_bytes ? SIZE_MAX : max + file_overhead_bytes;
}

[[noreturn]] void file_too_large(const std::string& source, const std::string& got) {
    throw value_error(source, "file too large for --max-bytes " +
                                  expected_got("at most " + std::to_string(max_file_bytes()) + " bytes", got));
}

bool exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

const array* bundle::find(const std::string& name) const {
    const std::string wanted = lower(name);
    for (const auto& a : arrays)
        if (lower(a.name) == wanted) return &a.value;
    return nullptr;
}

std::string read_file(const std::string& path) {
    if (path == "-") {
        // Chunked sgetn: with stdio sync on, per-character iteration would cost a getc
        // call per byte.
        std::string s;
        std::streambuf* buf = std::cin.rdbuf();
        char chunk[1 << 16];
        for (std::streamsize n; buf && (n = buf->sgetn(chunk, sizeof chunk)) > 0;) {
            s.append(chunk, static_cast<std::size_t>(n));
            if (s.size() > max_file_bytes()) file_too_large("<stdin>", "more");
        }
        if (!buf || std::ferror(stdin)) throw io_error("<stdin>", "cannot read standard input");
        return s;
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw io_error(path, std::string("cannot open file (") + std::strerror(errno) + ")");
    struct closer {
        int fd;
        ~closer() { ::close(fd); }
    } close_on_exit{fd};
    struct stat st;
    if (::fstat(fd, &st) != 0) throw io_error(path, std::string("cannot read file (") + std::strerror(errno) + ")");
    if (S_ISDIR(st.st_mode)) throw io_error(path, std::string("cannot read file (") + std::strerror(EISDIR) + ")");
    if (S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) > max_file_bytes()) {
        // Nothing of the size is allocated; a .npy header still gets its precise message.
        std::string head(file_overhead_bytes, '\0');
        const ssize_t n = ::pread(fd, head.data(), head.size(), 0);
        head.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
        if (is_npy(head)) check_npy_head(head, path);
        file_too_large(path, std::to_string(st.st_size));
    }
    std::string data;
    // The size is only a hint (pipes, /proc files and growing files report others).
    if (S_ISREG(st.st_mode) && st.st_size > 0) data.reserve(static_cast<std::size_t>(st.st_size));
    char chunk[1 << 16];
    for (;;) {
        const ssize_t n = ::read(fd, chunk, sizeof chunk);
        if (n < 0) {
            if (errno == EINTR) continue;
            throw io_error(path, std::string("cannot read file (") + std::strerror(errno) + ")");
        }
        if (n == 0) break;
        data.append(chunk, static_cast<std::size_t>(n));
        if (data.size() > max_file_bytes()) file_too_large(path, "more");
    }
    return data;
}

bundle load_bundle(const std::string& path) {
    bundle b = read_bundle(path);
    apply_naming_rule(b);
    return b;
}

array load_array(const std::string& spec) {
    std::string path = spec;
    std::string name;
    const std::size_t colon = spec.rfind(':');
    if (!exists(spec) && colon != std::string::npos && colon > 0 && colon + 1 < spec.size() &&
        spec.find('/', colon) == std::string::npos) {
        path = spec.substr(0, colon);
        name = spec.substr(colon + 1);
    }
    bundle b = read_bundle(path);
    if (name.empty()) {
        apply_naming_rule(b);
        if (b.arrays.size() == 1) return std::move(b.arrays.front().value);
        if (b.arrays.empty())
            throw value_error(spec, "file holds no arrays " + expected_got("one array", "none"));
        throw value_error(spec, "file holds " + std::to_string(b.arrays.size()) + " arrays " +
                                    expected_got("one array or FILE:NAME", name_list(b)));
    }
    // The name as stored ("arr_0") and the name the naming rule gives it ("x") both work.
    auto take = [&](const std::string& wanted) -> array* {
        for (auto& a : b.arrays)
            if (a.name == lower(wanted)) return &a.value;
        return nullptr;
    };
    if (array* a = take(name)) return std::move(*a);
    if (b.arrays.empty()) throw value_error(spec, "no array named '" + name + "' (file holds no arrays)");
    const std::string present = name_list(b);
    apply_naming_rule(b);
    if (array* a = take(name)) return std::move(*a);
    throw value_error(spec, "no array named '" + name + "' (expected one of: " + present + ")");
}

}  // namespace attn::io
