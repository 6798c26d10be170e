#pragma once
/// \file output.hpp
/// Atomic output: data is written to a temporary file beside the destination and
/// renamed over it only when complete, so a failed or interrupted run leaves no
/// partial file (docs/design.md §2).

#include <ext/stdio_filebuf.h>
#include <memory>
#include <ostream>
#include <string>

namespace attn::io {

/// Atomically replaces the file at `path`: write through stream(), then commit().
/// The temporary file gets the mode the destination would get from a shell
/// redirection (an existing file's mode, else 0666 & ~umask). No fsync: the rename
/// protects against failed and interrupted runs, not against power loss. An existing
/// regular file is replaced by renameat2(RENAME_EXCHANGE) and unlinking the old one,
/// which ext4 does not answer with an immediate writeback as it does a plain rename.
/// Destinations that are not regular files are never replaced (as with `cp` and
/// `sort -o`): a path that, after following symbolic links, is a device, FIFO or socket
/// is opened and written in place, and /dev/stdout, /dev/stderr and /dev/fd/N write to
/// that descriptor without truncating it. A symbolic link to a regular file (or a
/// dangling one) stays a link: the file it points to is replaced atomically.
/// Errors are io_error with the destination path as source and messages such as
/// "cannot write file (No such file or directory)".
class atomic_file {
public:
    /// Creates the temporary in the destination's directory: an unnamed file (O_TMPFILE)
    /// where the filesystem allows, which nothing — not even SIGKILL — can leave behind,
    /// named "<path>.attn-XXXXXX" only in commit(), just before the rename; elsewhere
    /// "<path>.attn-XXXXXX" from the start (as mkstemp does; the name's last component is
    /// cut to fit NAME_MAX). Each name is registered for remove_pending_temporaries()
    /// before it exists, so that no catchable signal can leave it behind. Throws io_error,
    /// with "(Operation canceled)" once stop_and_remove_temporaries() has run.
    explicit atomic_file(std::string path);
    atomic_file(const atomic_file&) = delete;
    atomic_file& operator=(const atomic_file&) = delete;
    /// Removes the temporary file unless commit() succeeded.
    ~atomic_file();

    std::ostream& stream() { return out_; }
    /// True when the destination is written in place (a device, FIFO, socket or named
    /// descriptor), whose stream cannot seek.
    bool in_place() const { return in_place_; }

    /// Flushes, names an unnamed temporary (linkat through /proc/self/fd), closes and
    /// renames the temporary file onto the destination (in place: flushes and closes); the
    /// hook of set_before_commit_hook runs just before the rename, with the named
    /// temporary in place.
    /// Throws io_error (e.g. disk full), after which the temporary file is removed.
    void commit();

private:
    std::string path_;
    std::string target_;  ///< path_ with symbolic links followed: what is replaced
    std::string temp_;
    std::unique_ptr<__gnu_cxx::stdio_filebuf<char>> buf_;
    std::ostream out_;
    bool in_place_ = false;  ///< a device, FIFO, socket or named descriptor: written directly
    bool unnamed_ = false;   ///< the temporary is an O_TMPFILE file, named only in commit()
    bool committed_ = false;
    int slot_ = -1;  ///< index in the registry of pending temporaries, -1 if none
};

/// True when atomic_file would write `path` in place rather than through a temporary
/// file: /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N, or an existing device,
/// FIFO or socket (symbolic links followed). Never throws.
bool written_in_place(const std::string& path) noexcept;

/// Deletes every temporary file of a live, uncommitted atomic_file (with unlink only).
/// Async-signal-safe. Up to 256 temporaries with paths shorter than 4096 bytes are
/// tracked; atomic_file refuses to create more (io_error), so none is left untracked.
void remove_pending_temporaries() noexcept;

/// For handlers of terminating signals, which then call _exit: from now on no
/// atomic_file creates a temporary (they throw io_error), threads that are creating one
/// are given up to 2 s to finish, then every pending temporary is deleted.
/// Async-signal-safe.
void stop_and_remove_temporaries() noexcept;

/// True once stop_and_remove_temporaries() has run: batch workers stop taking jobs.
bool stop_requested() noexcept;

/// A function every atomic_file::commit() calls with the complete temporary in place,
/// just before the rename (nullptr: none, the default). The attn binary installs one
/// only for its tests (ATTN_TEST_PAUSE_BEFORE_COMMIT_MS, src/cli/app.cpp), so that they
/// can interrupt a run at a known point.
void set_before_commit_hook(void (*hook)()) noexcept;

}  // namespace attn::io
