#pragma once
/// \file output.hpp
/// Atomic output: data is written to a temporary file beside the destination and
/// renamed over it only when complete, so a failed or interrupted run leaves no
/// partial file (DESIGN §2).

#include <fstream>
#include <string>

namespace attn::io {

/// Atomically replaces the file at `path`: write through stream(), then commit().
/// The temporary file gets the mode the destination would get from a shell
/// redirection (an existing file's mode, else 0666 & ~umask). No fsync: the rename
/// protects against failed and interrupted runs, not against power loss. An existing
/// regular file is replaced by renameat2(RENAME_EXCHANGE) and unlinking the old one,
/// which ext4 does not answer with an immediate writeback as it does a plain rename.
/// Errors are io_error with the destination path as source and messages such as
/// "cannot write file (No such file or directory)".
class atomic_file {
public:
    /// Creates "<path>.attn-XXXXXX" in the destination's directory (as mkstemp does) and
    /// registers it for remove_pending_temporaries() — before it exists, so that no
    /// signal can leave it behind. Throws io_error.
    explicit atomic_file(std::string path);
    atomic_file(const atomic_file&) = delete;
    atomic_file& operator=(const atomic_file&) = delete;
    /// Removes the temporary file unless commit() succeeded.
    ~atomic_file();

    std::ostream& stream() { return out_; }

    /// Flushes, closes and renames the temporary file onto the destination.
    /// Throws io_error (e.g. disk full), after which the temporary file is removed.
    /// Test-only hook: ATTN_TEST_PAUSE_BEFORE_COMMIT_MS=N in the environment makes it wait
    /// N ms before the rename, so tests can interrupt a run at a known point.
    void commit();

private:
    std::string path_;
    std::string temp_;
    std::ofstream out_;
    bool committed_ = false;
    int slot_ = -1;  ///< index in the registry of pending temporaries, -1 if none
};

/// Deletes every temporary file of a live, uncommitted atomic_file (with unlink only).
/// Async-signal-safe: meant for SIGINT/SIGTERM handlers, which then call _exit.
/// Up to 64 temporaries with paths shorter than 4096 bytes are tracked; others are
/// still removed by ~atomic_file, just not by this function.
void remove_pending_temporaries() noexcept;

}  // namespace attn::io
