#include "attn/io/output.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attn/error.hpp"

namespace attn::io {

namespace {

// Registry of temporaries for remove_pending_temporaries(). A signal handler may only
// touch lock-free atomics and call unlink, so paths live in fixed static buffers and
// a slot is claimed by compare-and-swap: free → busy (being filled) → armed.
// Whoever moves a slot out of `armed` owns it: the atomic_file (to free it) or the
// signal handler (to unlink the path; the slot then stays busy as the process exits).
constexpr int max_pending = 64;
constexpr std::size_t max_path = 4096;
enum : int { slot_free = 0, slot_busy = 1, slot_armed = 2 };

struct pending_slot {
    std::atomic<int> state{slot_free};
    char path[max_path];
};
static_assert(std::atomic<int>::is_always_lock_free, "signal handlers need lock-free atomics");

pending_slot pending[max_pending];

int register_temporary(const std::string& path) {
    if (path.size() >= max_path) return -1;
    for (int i = 0; i < max_pending; ++i) {
        int expected = slot_free;
        if (pending[i].state.compare_exchange_strong(expected, slot_busy, std::memory_order_acquire)) {
            std::memcpy(pending[i].path, path.c_str(), path.size() + 1);
            pending[i].state.store(slot_armed, std::memory_order_release);
            return i;
        }
    }
    return -1;
}

void unregister_temporary(int& slot) {
    if (slot < 0) return;
    int expected = slot_armed;
    pending[slot].state.compare_exchange_strong(expected, slot_free, std::memory_order_acq_rel);
    slot = -1;
}

std::string describe(int err) { return std::system_category().message(err); }

[[noreturn]] void fail(const std::string& path, int err) {
    throw io_error(path, "cannot write file (" + describe(err) + ")");
}

/// The process umask without changing it (umask(2) would race with other threads).
mode_t current_umask() {
    static const mode_t mask = [] {
        mode_t m = 022;
        if (std::FILE* f = std::fopen("/proc/self/status", "r")) {
            char line[256];
            unsigned value = 0;
            while (std::fgets(line, sizeof line, f))
                if (std::sscanf(line, "Umask: %o", &value) == 1) {
                    m = static_cast<mode_t>(value);
                    break;
                }
            std::fclose(f);
        }
        return m;
    }();
    return mask;
}

/// Creates "<path>.attn-XXXXXX" (mode 0600, like mkstemp) and returns its descriptor,
/// or -1 with errno set. The name is registered for remove_pending_temporaries() before
/// the file exists: a signal arriving at any moment, on any thread, finds every
/// temporary that exists (unlinking a name not yet created is harmless).
int create_temporary(const std::string& path, std::string& temp, int& slot) {
    static const char letters[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    static std::atomic<unsigned> counter{0};
    std::uint64_t seed = (static_cast<std::uint64_t>(::getpid()) << 32) ^
                         static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    for (int attempt = 0; attempt < 100; ++attempt) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL + counter.fetch_add(1);
        std::string name = path + ".attn-";
        for (int i = 0; i < 6; ++i) name += letters[(seed >> (10 + 6 * i)) % (sizeof letters - 1)];
        temp = name;
        slot = register_temporary(temp);
        const int fd = ::open(temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0) return fd;
        const int err = errno;
        unregister_temporary(slot);
        if (err != EEXIST) {
            errno = err;
            return -1;
        }
    }
    errno = EEXIST;
    return -1;
}

/// Test-only hook: with ATTN_TEST_PAUSE_BEFORE_COMMIT_MS=N in the environment, commit()
/// waits N milliseconds with the complete temporary file in place, so that tests can
/// interrupt a run at a known point (tests/test_cli_signals.cpp). Not for users.
void pause_for_tests() {
    if (const char* ms = std::getenv("ATTN_TEST_PAUSE_BEFORE_COMMIT_MS"))
        std::this_thread::sleep_for(std::chrono::milliseconds(std::atol(ms)));
}

/// rename(temp, path), except that an existing regular file is swapped out with
/// renameat2(RENAME_EXCHANGE) and then unlinked. ext4 (auto_da_alloc) answers a rename
/// over an existing file by starting the new file's writeback at once, in the renaming
/// thread: 80 ms for a 144 MB CSV on this machine, half of the whole run. The exchange
/// is as atomic for readers (they see the old file or the new one) and leaves the
/// writeback to the kernel's usual schedule. Where the exchange is not supported, or
/// the destination is missing or not a regular file, it is a plain rename.
/// Returns 0 or the errno of the failed rename.
int replace_file(const std::string& temp, const std::string& path) {
#if defined(RENAME_EXCHANGE)
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, path.c_str(), RENAME_EXCHANGE) == 0) {
        ::unlink(temp.c_str());  // the old file, now under the temporary name
        return 0;
    }
#endif
    return std::rename(temp.c_str(), path.c_str()) == 0 ? 0 : errno;
}

}  // namespace

void remove_pending_temporaries() noexcept {
    for (auto& slot : pending) {
        int expected = slot_armed;
        if (slot.state.compare_exchange_strong(expected, slot_busy, std::memory_order_acq_rel))
            ::unlink(slot.path);
    }
}

atomic_file::atomic_file(std::string path) : path_(std::move(path)) {
    if (path_.empty()) throw io_error(path_, "cannot write file (empty path)");
    mode_t mode = 0666 & ~current_umask();
    struct stat st {};
    if (::stat(path_.c_str(), &st) == 0) {
        if (S_ISDIR(st.st_mode)) fail(path_, EISDIR);
        mode = st.st_mode & 07777;
    }

    const int fd = create_temporary(path_, temp_, slot_);
    if (fd < 0) fail(path_, errno);
    // The temporary is created 0600; give it the mode the destination should keep.
    ::fchmod(fd, mode);
    out_.open(temp_, std::ios::binary | std::ios::trunc);
    const int open_err = errno;
    ::close(fd);
    if (!out_.is_open()) {
        ::unlink(temp_.c_str());
        unregister_temporary(slot_);
        fail(path_, open_err ? open_err : EIO);
    }
}

atomic_file::~atomic_file() {
    if (committed_) return;
    out_.close();
    ::unlink(temp_.c_str());
    unregister_temporary(slot_);
}

void atomic_file::commit() {
    if (committed_) return;
    errno = 0;
    out_.flush();
    int err = errno;
    bool ok = out_.good();
    if (ok) {
        errno = 0;
        out_.close();
        err = errno;
        ok = !out_.fail();
    }
    if (ok) pause_for_tests();
    if (ok) {
        err = replace_file(temp_, path_);
        ok = err == 0;
    }
    if (!ok) {
        out_.close();
        ::unlink(temp_.c_str());
        unregister_temporary(slot_);
        committed_ = true;  // nothing left for the destructor to remove
        fail(path_, err ? err : EIO);
    }
    committed_ = true;
    unregister_temporary(slot_);
}

}  // namespace attn::io
