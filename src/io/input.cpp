// Input files: read whole, recognised by content, named per docs/design.md §2.

#include "attn/io/input.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>

#include "attn/error.hpp"
#include "attn/text.hpp"
#include "attn/io/json.hpp"
#include "attn/io/limits.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "attn/io/read_only_file.hpp"
#include "attn/io/safetensors.hpp"

namespace attn::io {

const std::vector<input_kind>& input_kinds() {
    static const std::vector<input_kind> table{
        {"q", "q", false},
        {"k", "k", false},
        {"v", "v", false},
        {"x", "x", true},
        {"x_kv", "x-kv", false},
        {"w_q", "wq", false},
        {"w_k", "wk", false},
        {"w_v", "wv", false},
        {"b_q", "bq", false},
        {"b_k", "bk", false},
        {"b_v", "bv", false},
        {"w_o", "wo", false},
        {"b_o", "bo", false},
        {"in_proj_weight", "in-proj-weight", false},
        {"in_proj_bias", "in-proj-bias", false},
        {"attn_mask", "attn-mask", true},
        {"key_padding_mask", "key-padding-mask", true},
        {"attention_mask", "attention-mask", true},
        {"token_ids", "token-ids", true},
        {"embedding", "embedding", false},
        {"alibi_slopes", "alibi-slopes", true},
        {"document_ids", "document-ids", true},
        {"sinks", "sinks", true},
        {"position_ids", "position-ids", true},
        {"rope_cos", "rope-cos", false},
        {"rope_sin", "rope-sin", false},
        {"past_key", "past-key", false},
        {"past_value", "past-value", false},
        {"lengths", "", true},
        {"tokens", "", false},
        {"tokens_kv", "", false},
        {"words", "", false}};
    return table;
}

/// nn.MultiheadAttention's state_dict names for the arrays attn calls otherwise
/// (in_proj_weight and in_proj_bias are attn names as they are).
constexpr std::pair<const char*, const char*> state_dict_names[] = {
    {"q_proj_weight", "w_q"}, {"k_proj_weight", "w_k"}, {"v_proj_weight", "w_v"},
    {"out_proj.weight", "w_o"}, {"out_proj.bias", "b_o"}};

std::string canonical_name(const std::string& name) {
    for (const auto& [alias, canonical] : state_dict_names)
        if (name == alias) return canonical;
    return name;
}

bool is_attn_name(const std::string& name) {
    const std::string c = canonical_name(name);
    for (const input_kind& n : input_kinds())
        if (n.name == c) return true;
    return false;
}

namespace {


std::string display_name(const std::string& path) { return path == "-" ? "<stdin>" : path; }

/// How much of the start must be UTF-8 text: enough to expose a binary header (PNG,
/// gzip, a raw float dump whose first byte happens to be a digit), short enough that a
/// JSON file with a stray Latin-1 byte further on still gets read_json's line and column.
constexpr std::size_t text_probe_bytes = 16;

/// True when `bytes` (not blank) begin as a JSON text can, see check_json_start.
bool starts_like_json(std::string_view bytes) {
    constexpr std::string_view bom = "\xEF\xBB\xBF";  // nlohmann/json skips it, so we do
    if (bytes.substr(0, bom.size()) == bom) bytes.remove_prefix(bom.size());
    const std::size_t first = bytes.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return true;  // a lone BOM: read_json says what is missing
    if (std::string_view("{[\"-0123456789tfn").find(bytes[first]) == std::string_view::npos) return false;
    const std::string_view probe = bytes.substr(0, text_probe_bytes);
    for (std::size_t i = 0; i < probe.size();) {
        const char c = probe[i];
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\r' && c != '\n') return false;
        const std::size_t n = utf8_sequence_length(probe, i);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

/// "89 50 4e 47": the first bytes of a file, in hex, for messages.
std::string hex_head(std::string_view bytes) {
    constexpr std::size_t shown = 4;
    static constexpr char digits[] = "0123456789abcdef";
    std::string s;
    for (std::size_t i = 0; i < bytes.size() && i < shown; ++i) {
        const auto c = static_cast<unsigned char>(bytes[i]);
        if (i) s += ' ';
        s += digits[c >> 4];
        s += digits[c & 0xf];
    }
    return s;
}

constexpr const char* csv_message =
    "not a .npy, .npz, .safetensors or JSON file: CSV text (read it with numpy.loadtxt, save it with numpy.save)";

/// torch.save before 1.6 (and with _use_new_zipfile_serialization=False) writes a pickle:
/// protocol 2 starts with the bytes 80 02.
bool looks_like_torch_pickle(std::string_view bytes) { return bytes.size() >= 2 && bytes[0] == '\x80' && bytes[1] == '\x02'; }

/// Text whose first non-blank line holds commas or tabs between values and no JSON
/// brackets or quotes ("1,2,3", "a,b").
bool looks_like_csv(std::string_view bytes) {
    const std::size_t start = bytes.find_first_not_of(" \t\r\n");
    if (start == std::string_view::npos) return false;
    std::string_view line = bytes.substr(start, std::min(bytes.find('\n', start), start + 4096) - start);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.remove_suffix(1);
    return line.find_first_of(",\t") != std::string_view::npos && line.find_first_of("[]{}\"") == std::string_view::npos;
}

/// An .npz's labels (npz_context) as the bundle's, as a JSON input's "tokens" are; a
/// batch's (B, T) tokens are in meta.model.tokens too, and labels no rows here.
void take_context(bundle& b, const npz_context& c) {
    if (c.tokens.shape.size() == 1) b.tokens = c.tokens.values;
    if (c.tokens_kv.shape.size() == 1) b.tokens_kv = c.tokens_kv.values;
    if (c.words.shape.size() == 1) b.words = c.words.values;
}

/// Which .npz members to read: those attn looks for, or, when the archive has a single
/// member, that one (the naming rule may make it X). `name` is lower-cased.
using member_filter = std::function<bool(const std::string& name, std::size_t members)>;

bool attn_members(const std::string& name, std::size_t members) { return members == 1 || is_attn_name(name); }

/// The tensors of a checkpoint that `wanted` accepts (given lower-cased names), loaded;
/// `names` (if not null) receives every tensor's lower-cased name, in name order.
bundle read_checkpoint(const checkpoint& ck, const member_filter& wanted, std::vector<std::string>* names) {
    bundle b;
    const auto& tensors = ck.tensors();
    for (const auto& e : tensors) {
        std::string n = lower(e.name);
        if (wanted(n, tensors.size())) b.arrays.push_back({n, ck.load(e.name)});
        if (names) names->push_back(std::move(n));
    }
    return b;
}

/// "a, b, c" — at most `shown` names, then how many there are in all.
std::string some_names(const std::vector<std::string>& names, std::size_t shown = 8) {
    std::string s;
    for (std::size_t i = 0; i < names.size() && i < shown; ++i) s += (i ? ", " : "") + names[i];
    if (names.size() > shown) s += ", ... (" + std::to_string(names.size()) + " in all)";
    return s.empty() ? "none" : s;
}

/// One tensor of a checkpoint for load_array: NAME as stored, else the one name equal
/// to it ignoring case (as .npz members are matched), else a lone tensor as X.
array checkpoint_array(const checkpoint& ck, const std::string& spec, const std::string& name) {
    const auto& tensors = ck.tensors();
    std::vector<std::string> all;
    for (const auto& e : tensors) all.push_back(e.name);
    if (name.empty()) {
        if (tensors.size() == 1) return ck.load(tensors.front().name);
        if (tensors.empty()) throw value_error(spec, "file holds no arrays " + expected_got("one array", "none"));
        // Nothing is loaded: a checkpoint of hundreds of tensors is addressed by name.
        throw value_error(spec, "file holds " + std::to_string(tensors.size()) + " arrays " +
                                    expected_got("one array or FILE:NAME", some_names(all)));
    }
    if (ck.find(name)) return ck.load(name);
    std::vector<std::string> matches;
    for (const auto& n : all)
        if (lower(canonical_name(n)) == lower(name) || lower(n) == lower(name)) matches.push_back(n);
    if (matches.size() == 1) return ck.load(matches.front());
    if (matches.size() > 1)
        throw value_error(spec, "no array named '" + name + "' " +
                                    expected_got("one name equal to it ignoring case", some_names(matches)));
    if (tensors.size() == 1 && lower(name) == "x" && !is_attn_name(lower(all.front()))) return ck.load(all.front());
    if (all.empty()) throw value_error(spec, "no array named '" + name + "' (file holds no arrays)");
    throw value_error(spec, "no array named '" + name + "' (expected one of: " + some_names(all) + ")");
}

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

/// The largest input file read_file accepts: max_array_bytes() plus room for headers.
std::size_t max_file_bytes() {
    const std::size_t max = max_array_bytes();
    return max > SIZE_MAX - file_overhead_bytes ? SIZE_MAX : max + file_overhead_bytes;
}

/// Enough for every .npy header NumPy writes (version 1.0 headers are < 64 KiB).
constexpr std::size_t npy_head_bytes = (std::size_t{1} << 16) + 16;

/// A regular .npy or .npz file read in place (docs/design.md §5.4): a .npy's data is read
/// straight into its array, an .npz's wanted members are inflated straight into theirs,
/// so that each byte is held once rather than also in a copy of the whole file. As
/// read_bundle's readers, with `named` set when `names` was filled (an .npz). Returns
/// nullopt for anything else: stdin, a FIFO, other content, a file over read_file's size
/// limit, a .npy whose size is not what its header declares, an archive libzip cannot
/// open. The caller then reads the file whole, and its reader says what is wrong.
std::optional<bundle> read_in_place(const std::string& path, const member_filter& wanted,
                                    std::vector<std::string>* names, bool& named) {
    if (path == "-") return std::nullopt;
    // Only a regular file is opened here: a FIFO opened twice (here, then by read_file)
    // would block, or lose what its writer sent in between.
    struct stat entry;
    if (::stat(path.c_str(), &entry) != 0 || !S_ISREG(entry.st_mode)) return std::nullopt;
    const read_only_file file(path, std::nothrow);
    if (file.fd() < 0) return std::nullopt;
    const int fd = file.fd();
    const struct stat& st = file.status();
    if (!S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) > max_file_bytes())
        return std::nullopt;
    const auto size = static_cast<std::size_t>(st.st_size);
    std::string head(std::min(size, npy_head_bytes), '\0');
    std::size_t got = 0;
    while (got < head.size()) {
        const ssize_t n = ::read(fd, head.data() + got, head.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return std::nullopt;
        got += static_cast<std::size_t>(n);
    }
    bundle b;
    if (is_npy(head)) {
        // Any difference between the header and the file gets read_npy's message.
        const std::optional<std::size_t> total = check_npy_head(head, path);
        if (!total || *total != size) return std::nullopt;
        auto read_rest = [&](std::byte* out, std::size_t n) -> std::size_t {
            for (;;) {
                const ssize_t r = ::read(fd, out, n);
                if (r >= 0) return static_cast<std::size_t>(r);
                if (errno != EINTR) throw io_error(path, std::string("cannot read file (") + std::strerror(errno) + ")");
            }
        };
        b.arrays.push_back({"x", read_npy_streamed(head, read_rest, path)});
        named = false;
        return b;
    }
    if (is_zip(head)) {
        // read_npz_file fills `all` before it reads a member, so the filter is given the
        // member count, and lower-cased names, as read_bundle's is.
        std::vector<std::string> all;
        std::size_t count = 0;  // the members that are not context (tokens, meta, …)
        auto arrays = read_npz_file(
            path, path, nullptr,
            [&](const std::string& n) {
                if (!count) count = static_cast<std::size_t>(std::count_if(all.begin(), all.end(), [](const std::string& m) { return !is_context_member(lower(m)); }));
                return wanted(lower(n), count);
            },
            &all);
        if (!arrays) return std::nullopt;
        b.arrays = std::move(*arrays);
        if (const auto context = read_npz_context_file(path, path)) take_context(b, *context);
        for (auto& n : all) n = lower(n);
        if (names) *names = std::move(all);
        named = true;
        return b;
    }
    return std::nullopt;
}

/// Reads a file without renaming anything: names lower-cased, in file order (tensor name
/// order for a checkpoint). Of an .npz or a checkpoint, only the members `wanted` accepts
/// are read; `names` (if not null) receives every member's lower-cased name.
bundle read_bundle(const std::string& path, const member_filter& wanted = attn_members,
                   std::vector<std::string>* names = nullptr) {
    const std::string source = display_name(path);
    bundle b;
    bool named = false;  // `names` already filled
    std::string bytes;
    if (is_checkpoint_file(path)) {
        b = read_checkpoint(checkpoint::open(path), wanted, names);
        named = true;
    } else if (auto in_place = read_in_place(path, wanted, names, named)) {
        b = std::move(*in_place);
    } else if (bytes = read_file(path); looks_like_safetensors(bytes)) {
        b = read_checkpoint(checkpoint::read(std::move(bytes), source), wanted, names);
        named = true;
    } else if (is_npy(bytes)) {
        b.arrays.push_back({"x", read_npy(bytes, source)});
    } else if (is_zip(bytes)) {
        std::vector<std::string> all = npz_names(bytes, source);
        for (auto& n : all) n = lower(n);
        const auto count = static_cast<std::size_t>(std::count_if(all.begin(), all.end(), [](const std::string& m) { return !is_context_member(m); }));
        b.arrays = read_npz(bytes, source, nullptr, [&](const std::string& n) { return wanted(lower(n), count); });
        take_context(b, read_npz_context(bytes, source));
        if (names) *names = std::move(all);
        named = true;
    } else {
        check_json_start(bytes, source);
        b = read_json(bytes, source);
    }
    for (auto& a : b.arrays) a.name = lower(a.name);
    if (names && !named)
        for (const auto& a : b.arrays) names->push_back(a.name);
    // State_dict names become attn's; names that then repeat (an .npz member "Q" beside
    // "q", or q_proj_weight beside w_q) are refused: NumPy would keep one, attn another.
    for (std::size_t i = 0; i < b.arrays.size(); ++i) {
        const std::string stored = b.arrays[i].name;
        if (stored == "in_proj_weight" || stored == "q_proj_weight" || stored == "k_proj_weight" || stored == "v_proj_weight")
            b.state_dict = true;
        b.arrays[i].name = canonical_name(stored);
        for (std::size_t j = 0; j < i; ++j)
            if (b.arrays[j].name == b.arrays[i].name)
                throw format_error(source, "duplicate array name " +
                                               expected_got("each name once, ignoring case",
                                                            "'" + b.arrays[i].name + "' twice" +
                                                                (stored != b.arrays[i].name ? " (as " + stored + ")" : "")));
    }
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

bool exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

bool is_regular_file(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
}

}  // namespace

void check_json_start(std::string_view bytes, const std::string& source) {
    if (bytes.find_first_not_of(" \t\r\n") == std::string_view::npos)
        throw format_error(source, "empty input " + expected_got(".npy, .npz, .safetensors or JSON",
                                                              bytes.empty() ? "0 bytes" : "only whitespace"));
    if (looks_like_torch_pickle(bytes)) throw format_error(source, torch_archive_message);
    if (looks_like_csv(bytes)) throw format_error(source, csv_message);
    if (!starts_like_json(bytes))
        throw format_error(source, "not a .npy, .npz, .safetensors or JSON file (starts with bytes " + hex_head(bytes) + ")");
}

bool is_checkpoint_file(const std::string& path) {
    if (path == "-") return false;
    if (is_safetensors_index_name(path)) return true;
    // Only a regular file is opened here: opening a FIFO twice (here, then to read it)
    // would block, or leave its writer without a reader in between.
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return false;  // read_file reports it
    if (!S_ISREG(st.st_mode)) return ends_with(path, ".safetensors") && !S_ISDIR(st.st_mode);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;  // read_file reports it
    char head[16];
    const ssize_t n = ::pread(fd, head, sizeof head, 0);
    ::close(fd);
    const std::string_view bytes(head, n > 0 ? static_cast<std::size_t>(n) : 0);
    if (looks_like_safetensors(bytes)) return true;
    // A broken checkpoint (a header length over the limit, a truncated file) still gets
    // the checkpoint reader's message rather than "not a .npy, .npz … file".
    return ends_with(path, ".safetensors") && !is_npy(bytes) && !is_zip(bytes);
}

const array* bundle::find(const std::string& name) const {
    const std::string wanted = lower(name);
    for (const auto& a : arrays)
        if (lower(a.name) == wanted) return &a.value;
    return nullptr;
}

namespace {

/// Reads a stream whose size is not known in advance (a FIFO, a character device,
/// stdin) through `read_some` (returns bytes read, 0 at the end, throws on error), in
/// blocks of 64 MiB, refusing it through `too_large` as soon as it holds more than
/// `max_bytes`. A std::string grown by doubling would hold up to three times the limit
/// while it reallocates; the blocks are above glibc's largest mmap threshold (32 MiB),
/// so each is returned to the system as soon as it is copied into the result, which is
/// written page by page: the peak stays near the limit plus one block.
std::string read_stream(const std::function<std::size_t(char*, std::size_t)>& read_some, std::size_t max_bytes,
                        const std::function<void()>& too_large) {
    constexpr std::size_t block_bytes = std::size_t{64} << 20;
    std::vector<std::unique_ptr<char[]>> blocks;
    std::size_t total = 0, in_last = block_bytes;
    for (;;) {
        if (in_last == block_bytes) {
            blocks.push_back(std::unique_ptr<char[]>(new char[block_bytes]));
            in_last = 0;
        }
        // Never more than one byte past the limit, so that a fast device is not read a
        // whole block beyond it.
        const std::size_t room = max_bytes - std::min(total, max_bytes) + 1;
        const std::size_t n = read_some(blocks.back().get() + in_last, std::min(block_bytes - in_last, room));
        if (n == 0) break;
        in_last += n;
        total += n;
        if (total > max_bytes) too_large();
    }
    std::string data;
    data.resize(total);
    std::size_t at = 0;
    for (auto& b : blocks) {
        const std::size_t n = std::min(block_bytes, total - at);
        std::memcpy(data.data() + at, b.get(), n);
        at += n;
        b.reset();
    }
    return data;
}

}  // namespace

std::string read_file_at_most(const std::string& path, std::size_t max_bytes, const std::string& what) {
    auto too_large = [&](const std::string& source, const std::string& got) {
        throw limit_error(source, what + " " + expected_got("at most " + std::to_string(max_bytes) + " bytes", got));
    };
    if (path == "-") {
        std::streambuf* buf = std::cin.rdbuf();
        if (!buf) throw io_error("<stdin>", "cannot read standard input");
        std::string s = read_stream(
            [&](char* out, std::size_t n) {
                const std::streamsize got = buf->sgetn(out, static_cast<std::streamsize>(n));
                return got > 0 ? static_cast<std::size_t>(got) : std::size_t{0};
            },
            max_bytes, [&] { too_large("<stdin>", "more"); });
        if (std::ferror(stdin)) throw io_error("<stdin>", "cannot read standard input");
        return s;
    }
    const read_only_file file(path);
    const int fd = file.fd();
    const struct stat& st = file.status();
    auto read_some = [&](char* out, std::size_t n) -> std::size_t {
        for (;;) {
            const ssize_t got = ::read(fd, out, n);
            if (got >= 0) return static_cast<std::size_t>(got);
            if (errno != EINTR) throw io_error(path, std::string("cannot read file (") + std::strerror(errno) + ")");
        }
    };
    if (!S_ISREG(st.st_mode)) return read_stream(read_some, max_bytes, [&] { too_large(path, "more"); });
    if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
        // Nothing of the size is allocated; a .npy header still gets its precise message.
        std::string head(file_overhead_bytes, '\0');
        const ssize_t n = ::pread(fd, head.data(), head.size(), 0);
        head.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
        if (is_npy(head)) check_npy_head(head, path);
        too_large(path, std::to_string(st.st_size));
    }
    std::string data;
    // The size is only a hint (/proc files and growing files report others).
    if (st.st_size > 0) data.reserve(static_cast<std::size_t>(st.st_size));
    char chunk[1 << 16];
    for (;;) {
        const std::size_t n = read_some(chunk, sizeof chunk);
        if (n == 0) break;
        data.append(chunk, n);
        if (data.size() > max_bytes) too_large(path, "more");
    }
    return data;
}

std::string read_file(const std::string& path) {
    return read_file_at_most(path, max_file_bytes(), "file too large for --max-bytes");
}

std::pair<std::string, std::string> split_array_spec(const std::string& spec) {
    if (exists(spec)) return {spec, ""};
    // The first ':' after which the path part exists: tensor names may hold ':' too.
    for (std::size_t colon = spec.find(':'); colon != std::string::npos; colon = spec.find(':', colon + 1))
        if (colon > 0 && colon + 1 < spec.size() && is_regular_file(spec.substr(0, colon)))
            return {spec.substr(0, colon), spec.substr(colon + 1)};
    // No such file: split at the last ':' so that the error names the path part.
    const std::size_t colon = spec.rfind(':');
    if (colon != std::string::npos && colon > 0 && colon + 1 < spec.size() && spec.find('/', colon) == std::string::npos)
        return {spec.substr(0, colon), spec.substr(colon + 1)};
    return {spec, ""};
}

bundle load_bundle(const std::string& path) {
    std::vector<std::string> names;
    bundle b = read_bundle(path, attn_members, &names);
    // An .npz's labels and meta (tokens, meta, …) are read as labels, not arrays.
    names.erase(std::remove_if(names.begin(), names.end(), [](const std::string& n) { return is_context_member(n); }), names.end());
    apply_naming_rule(b);
    // Everything else the file holds is set aside by name, for the caller to report.
    const bool lone_x = names.size() == 1 && b.arrays.size() == 1 && b.arrays.front().name == "x";
    for (const auto& n : names)
        if (!lone_x && !is_attn_name(n)) b.ignored.push_back(n);
    b.arrays.erase(std::remove_if(b.arrays.begin(), b.arrays.end(),
                                  [](const named_array& a) { return !is_attn_name(a.name); }),
                   b.arrays.end());
    return b;
}

array load_array(const std::string& spec) {
    // "FILE:" names no member; without this the reader would look for a file called "FILE:".
    if (spec.size() > 1 && spec.back() == ':' && !exists(spec) && is_regular_file(spec.substr(0, spec.size() - 1)))
        throw value_error(spec, "empty array name after ':' " + expected_got("FILE or FILE:NAME", "FILE:"));
    const auto split = split_array_spec(spec);
    const std::string& path = split.first;
    const std::string& name = split.second;
    if (is_checkpoint_file(path)) return checkpoint_array(checkpoint::open(path), spec, name);
    // Only the member asked for is read (or a lone member, which the naming rule may call X).
    const std::string wanted_name = lower(name);
    std::vector<std::string> names;
    bundle b = read_bundle(
        path, [&](const std::string& n, std::size_t members) { return name.empty() || members == 1 || n == wanted_name; },
        &names);
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
    if (names.empty()) throw value_error(spec, "no array named '" + name + "' (file holds no arrays)");
    std::string present;
    for (const auto& n : names) present += (present.empty() ? "" : ", ") + n;
    apply_naming_rule(b);
    if (array* a = take(name)) return std::move(*a);
    throw value_error(spec, "no array named '" + name + "' (expected one of: " + present + ")");
}

}  // namespace attn::io
