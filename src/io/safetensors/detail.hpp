#pragma once
// What the files of the safetensors reader (include/attn/io/safetensors.hpp) share: the
// bytes of a file and the guarded read of a mapping (mapping.cpp), the checkpoint's state
// and the checked headers that fill it (header.cpp), the dtypes load() converts
// (convert.cpp). checkpoint.cpp holds the members of io::checkpoint.

#include <setjmp.h>
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "attn/io/safetensors.hpp"
#include "attn/tensor.hpp"

namespace attn::io {

namespace safetensors_detail {

/// The bytes of one file: a read-only mapping of a regular file, or the whole content
/// held in memory (stdin, pipes, the fuzz target).
struct region {
    const std::byte* data = nullptr;
    std::size_t size = 0;
    void* mapped = nullptr;
    std::string path;  ///< of a mapping, to check before its data is read that it is whole
    std::string held;

    region() = default;
    region(const region&) = delete;
    region& operator=(const region&) = delete;
    ~region();
};

/// A region holding `bytes` in memory.
std::shared_ptr<region> hold(std::string bytes);

/// Maps `path` (a regular file) or reads it whole (anything else). Throws io_error.
std::shared_ptr<region> map_file(const std::string& path);

/// Where a SIGBUS in this thread jumps to while read_guarded runs, else nullptr.
extern thread_local sigjmp_buf* bus_jump;

/// Installs on_bus_error once, keeping the handler it replaces.
void install_bus_handler();

/// Throws io_error(r.path, "file changed while being read (expected <r.size> bytes, as
/// when it was opened, got <got>)").
[[noreturn]] void file_changed(const region& r, const std::string& got);

/// Runs `read` (plain loads and stores, no allocation: a SIGBUS leaves it by siglongjmp)
/// over the bytes of `r`, after checking that its file still holds them; throws
/// io_error(path, "file changed while being read (…)") when it does not.
template <class Read>
void read_guarded(const region& r, Read&& read) {
    if (!r.mapped) {
        read();
        return;
    }
    struct stat st;
    if (::stat(r.path.c_str(), &st) == 0 && static_cast<std::uint64_t>(st.st_size) < r.size)
        file_changed(r, std::to_string(st.st_size) + " bytes");
    install_bus_handler();
    sigjmp_buf jump;
    sigjmp_buf* const outer = bus_jump;
    if (sigsetjmp(jump, 1) != 0) {
        bus_jump = outer;
        file_changed(r, "fewer (bus error reading its data)");
    }
    bus_jump = &jump;
    read();
    bus_jump = outer;
}

/// Drops the resident pages of the mapped bytes [p, p + n) once they have been copied out
/// (a converted or realigned tensor): a whole-model run reads every layer's weights once,
/// and the mapping's pages would otherwise stay in the process's memory for the rest of
/// the run (about 0.7 GB of a 24-layer 0.5B model). Only pages wholly inside the range go,
/// so no other tensor's bytes, a view's among them, are touched. The mapping is private and
/// read-only: a page read again is faulted in from the file, unchanged.
void release_copied_pages(const region& r, const std::byte* p, std::size_t n);

/// The attn dtype a stored dtype is loaded as, or nullopt when attn does not read it.
std::optional<dtype> loaded_type(std::string_view name);

/// True for the stored dtypes load() converts to float32 (BF16 and the F8 kinds).
bool converted_to_f32(const std::string& stored_type);

/// Copies `count` elements, `stored` bytes as stored with dtype `stored_type`, from the
/// mapping at `from` to `to` as load() gives them: BF16 and F8 converted to float32
/// exactly, BOOL as 0/1 bytes, any other dtype byte for byte.
void copy_as_loaded(const std::string& stored_type, const std::byte* from, std::size_t count, std::size_t stored, std::byte* to);

/// `name` in double quotes, as messages name a tensor.
std::string in_quotes(const std::string& name);

}  // namespace safetensors_detail

struct checkpoint::state {
    std::string path;
    struct shard {
        std::string file;
        std::shared_ptr<const safetensors_detail::region> bytes;
        std::size_t data_start = 0;  ///< 8 + header length
    };
    std::vector<shard> shards;
    std::vector<tensor_entry> entries;       ///< sorted by name
    std::vector<std::size_t> shard_of;       ///< per entry
    std::map<std::string, std::string> metadata;

    mutable std::mutex mutex;
    mutable std::set<std::string> loaded;
    mutable std::size_t bytes_loaded = 0;
};

namespace safetensors_detail {

/// True when `bytes` (after an optional byte order mark and whitespace) start with '{':
/// an index's JSON, as opposed to a safetensors file's binary length.
bool starts_with_brace(std::string_view bytes);

/// Checks the header of `file`, held in `bytes`, and adds the file to `s` as a shard
/// with its entries (only those named in `only`, a sorted list, when it is given); the
/// first file's "__metadata__" becomes the checkpoint's. Throws format_error.
void add_file(checkpoint::state& s, const std::string& file, std::shared_ptr<const region> bytes,
              const std::vector<std::string>* only);

/// Sorts the entries of `s` by name, their shards with them.
void sort_entries(checkpoint::state& s);

/// Reads the index `path` ({"weight_map": {NAME: SHARD}}) and adds each shard it names
/// to `s`, with the names it maps there. Throws format_error, io_error, limit_error.
void open_index(checkpoint::state& s, const std::string& path);

}  // namespace safetensors_detail

}  // namespace attn::io
