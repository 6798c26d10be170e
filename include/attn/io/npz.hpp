#pragma once
/// \file npz.hpp
/// NumPy .npz archives (a zip of .npy members, stored or deflated, ZIP64 as written by
/// `np.savez` and `np.savez_compressed`), through libzip.

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attn/io/npy.hpp"
#include "attn/tensor.hpp"

namespace attn::io {

using attn::named_array;

/// True when `bytes` starts with a zip local-file or end-of-central-directory signature.
bool is_zip(std::string_view bytes);

/// The message for a file torch.save wrote (a zip of pickles, or one pickle).
inline constexpr const char* torch_archive_message =
    "not a .npy, .npz, .safetensors or JSON file: a PyTorch archive (save tensors with numpy.save or "
    "safetensors.torch.save_file)";

/// True when `bytes` hold a readable zip archive with a member whose full name `match`
/// accepts (e.g. a PyTorch archive's "<name>/data.pkl"). Never throws for a broken
/// archive: it is then false, and read_npz says what is wrong.
bool zip_has_member(std::string_view bytes,
                    const std::function<bool(const std::string&)>& match);

/// The names of the `<name>.npy` members of an .npz held in memory, in archive order,
/// without ".npy", read from the central directory (no member is inflated).
/// Throws format_error for a broken archive.
std::vector<std::string> npz_names(std::string_view bytes, const std::string& source);

/// Reads the `<name>.npy` members of an .npz held in memory for which `wanted(name)` is
/// true (every member without a filter), in archive order; the name is the member name
/// without ".npy". Members not wanted are not inflated at all. Each member's .npy header
/// is checked before its data is inflated: an array over max_array_bytes(), or a member
/// whose stated size exceeds what its header declares, is refused first. The arrays read
/// from one archive may hold max_array_bytes() together (check_file_bytes).
/// Throws format_error for a broken archive or member (the source is "<source>:<member>"
/// for member errors; a PyTorch archive gets torch_archive_message), limit_error over the limits. If `stored` is not null it receives
/// each array's npy_layout, in the same order.
std::vector<named_array> read_npz(std::string_view bytes, const std::string& source,
                                  std::vector<npy_layout>* stored = nullptr,
                                  const std::function<bool(const std::string&)>& wanted = {});

/// read_npz of the .npz file at `path`, read from the file as needed (libzip's file
/// source): only the central directory and the wanted members are read, each inflated
/// straight into its array's buffer, so that every byte is held once. `names` (if not
/// null) receives every member's name, as npz_names would. Returns nullopt when libzip
/// cannot open the file as an archive: the caller reads it whole and read_npz says why.
/// Throws as read_npz does (torch_archive_message for a PyTorch archive).
std::optional<std::vector<named_array>> read_npz_file(const std::string& path, const std::string& source,
                                                      std::vector<npy_layout>* stored = nullptr,
                                                      const std::function<bool(const std::string&)>& wanted = {},
                                                      std::vector<std::string>* names = nullptr);

/// Reads every array of the .npz file at `path` in pieces of about `piece_bytes`
/// (read_npy_in_pieces), `passes`
/// times over each member before the next, never holding one: begin(name, described,
/// layout) once per member (its dtype and shape, no data) before its first piece, then
/// piece(pass, elements) for each piece of each pass. Returns nullopt when libzip cannot open the file (read it
/// whole: read_npz says why), false (stopped) at the first member that is not a
/// well-formed .npy or is Fortran-ordered (read the file whole), true when every member
/// was read. A member may exceed --max-bytes. Throws as read_npz does (format_error for
/// a bad archive or member, torch_archive_message, a zip bomb), and what the callbacks throw.
std::optional<bool> read_npz_file_in_pieces(const std::string& path, const std::string& source, int passes,
                                            const std::function<void(const std::string&, const array&, const npy_layout&)>& begin,
                                            const std::function<void(int, const array&)>& piece, std::size_t piece_bytes);

/// A member given as its .npy bytes (a unicode array of text_npy, say), named without ".npy".
struct npz_member {
    std::string name;
    std::string npy;
};

/// Writes the arrays as an uncompressed .npz (`np.savez` layout, members "<name>.npy"),
/// then the `extra` members in their order. Throws io_error if `out` fails.
void write_npz(std::ostream& out, const std::vector<named_array>& arrays, const std::vector<npz_member>& extra = {});

/// What attn writes beside a run's stages in an .npz (docs/design.md §6.2), so that plot,
/// view and compare of a saved run have its labels and settings: `tokens`, `tokens_kv`,
/// `words` (NumPy unicode arrays: (T,) for one sequence, (B, T) for a batch whose items
/// differ) and `meta` (a 0-d unicode array holding the run's JSON meta).
struct npz_context {
    text_array tokens, tokens_kv, words;
    std::string meta;  ///< JSON text, or empty
};

/// True for the members an .npz's context is held in: tokens, tokens_kv, words and meta
/// (lower case). read_npz and read_npz_file pass over them; read_npz_context reads them.
bool is_context_member(const std::string& name);

/// The context members of an .npz held in memory (read_npz's checks: a member's size
/// against its header and against max_array_bytes()). Throws format_error for a broken
/// archive or member, value_error("<source>:<member>", "not a unicode array (…)") for a
/// context member of another dtype.
npz_context read_npz_context(std::string_view bytes, const std::string& source);

/// read_npz_context of the .npz file at `path`, reading only the context members;
/// nullopt when libzip cannot open the file.
std::optional<npz_context> read_npz_context_file(const std::string& path, const std::string& source);

}  // namespace attn::io
