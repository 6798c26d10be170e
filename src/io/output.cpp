#include "attn/io/output.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <system_error>

#include <ext/stdio_filebuf.h>
#include <time.h>

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
// Static storage is only touched as slots are used: 256 slots of 4 KiB cost nothing
// until a batch has that many outputs in flight.
constexpr int max_pending = 256;
constexpr std::size_t max_path = 4096;
enum : int { slot_free = 0, slot_busy = 1, slot_armed = 2 };

struct pending_slot {
    std::atomic<int> state{slot_free};
    char path[max_path];
};
static_assert(std::atomic<int>::is_always_lock_free, "signal handlers need lock-free atomics");

pending_slot pending[max_pending];

// Set once a terminating signal arrives: no temporary may be created after that.
std::atomic<bool> stopping{false};
// Threads between deciding to create a temporary and having it registered and on disk;
// the signal handler waits for them (briefly) before it sweeps the registry.
std::atomic<int> creating{0};
thread_local bool this_thread_creating = false;

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

/// Marks the calling thread as creating a temporary for the duration of a scope; refuses
/// (EINTR) once a terminating signal has arrived.
struct creation_guard {
    bool ok;
    creation_guard() {
        creating.fetch_add(1);
        this_thread_creating = true;
        ok = !stopping.load();
    }
    ~creation_guard() {
        this_thread_creating = false;
        creating.fetch_sub(1);
    }
};

/// Creates "<dir>/<name>.attn-XXXXXX" (mode 0600, like mkstemp) and returns its
/// descriptor, or -1 with errno set. The name's last component is cut so that it fits
/// NAME_MAX (255 bytes) even when the destination's own name is 244–255 bytes long.
/// The name is registered for remove_pending_temporaries() before the file exists: a
/// signal arriving at any moment, on any thread, finds every temporary that exists.
template <class Make>
int name_temporary(const std::string& path, std::string& temp, int& slot, const Make& make) {
    static const char letters[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    static std::atomic<unsigned> counter{0};
    constexpr std::size_t name_max = 255, suffix = 12;  // ".attn-XXXXXX"
    const std::size_t slash = path.find_last_of('/');
    const std::size_t base = slash == std::string::npos ? 0 : slash + 1;
    const std::string prefix = path.substr(0, base + std::min(path.size() - base, name_max - suffix));
    std::uint64_t seed = (static_cast<std::uint64_t>(::getpid()) << 32) ^
                         static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    for (int attempt = 0; attempt < 100; ++attempt) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL + counter.fetch_add(1);
        std::string name = prefix + ".attn-";
        for (int i = 0; i < 6; ++i) name += letters[(seed >> (10 + 6 * i)) % (sizeof letters - 1)];
        temp = name;
        creation_guard guard;
        if (!guard.ok) {
            errno = EINTR;
            return -1;
        }
        slot = register_temporary(temp);
        if (slot < 0) {
            errno = temp.size() >= max_path ? ENAMETOOLONG : EMFILE;
            return -1;
        }
        const int fd = make(temp);
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

int create_temporary(const std::string& path, std::string& temp, int& slot) {
    return name_temporary(path, temp, slot,
                          [](const std::string& name) { return ::open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600); });
}

/// An unnamed file in the folder of `path` (O_TMPFILE, mode 0600), or -1 with errno set
/// where the kernel or the filesystem has none (EOPNOTSUPP, EISDIR on old kernels) or
/// the folder cannot take it. Nothing names it until link_temporary: a process killed
/// outright (SIGKILL, the OOM killer, a power cut) leaves nothing behind.
int create_unnamed(const std::string& path) {
#ifdef O_TMPFILE
    // link_temporary names it through /proc: without /proc (a bare chroot) it could not.
    static const bool proc = ::access("/proc/self/fd", X_OK) == 0;
    if (!proc) {
        errno = EOPNOTSUPP;
        return -1;
    }
    const std::size_t slash = path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    return ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#else
    (void)path;
    errno = EOPNOTSUPP;
    return -1;
#endif
}

/// Gives the unnamed file `fd` the name "<path>.attn-XXXXXX" (registered as
/// create_temporary registers its names), through its /proc/self/fd link: linkat with
/// AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH. Returns 0, or -1 with errno set.
int link_temporary(int fd, const std::string& path, std::string& temp, int& slot) {
    const std::string proc = "/proc/self/fd/" + std::to_string(fd);
    return name_temporary(path, temp, slot, [&](const std::string& name) {
        return ::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0 ? 0 : -1;
    });
}

std::atomic<void (*)()> before_commit_hook{nullptr};

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

/// The descriptor a path names directly, for /dev/stdout, /dev/stderr and /dev/fd/N
/// (and /proc/self/fd/N), else -1. Writing there must not truncate or replace what the
/// shell redirected the descriptor to (`attn ... -o /dev/stdout >> log`).
int named_descriptor(const std::string& path) {
    if (path == "/dev/stdout") return STDOUT_FILENO;
    if (path == "/dev/stderr") return STDERR_FILENO;
    for (const char* prefix : {"/dev/fd/", "/proc/self/fd/"}) {
        const std::size_t n = std::strlen(prefix);
        if (path.size() > n && path.size() <= n + 9 && path.compare(0, n, prefix) == 0 &&
            path.find_first_not_of("0123456789", n) == std::string::npos)
            return std::atoi(path.c_str() + n);
    }
    return -1;
}

/// Follows a chain of symbolic links (up to 40, as the kernel does) to the name the data
/// lands under, which need not exist yet (a dangling link is written through, as `cp`
/// and a shell redirection do). Relative link targets are taken from the link's folder.
std::string resolve_links(std::string path) {
    for (int hops = 0; hops < 40; ++hops) {
        struct stat st {};
        if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
        std::string target(static_cast<std::size_t>(st.st_size > 0 ? st.st_size : 4095) + 1, '\0');
        const ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
        if (n < 0 || static_cast<std::size_t>(n) >= target.size()) return path;
        target.resize(static_cast<std::size_t>(n));
        if (target.empty() || target[0] != '/') {
            const std::size_t slash = path.find_last_of('/');
            if (slash != std::string::npos) target = path.substr(0, slash + 1) + target;
        }
        path = target;
    }
    return path;
}

}  // namespace

void remove_pending_temporaries() noexcept {
    for (auto& slot : pending) {
        int expected = slot_armed;
        if (slot.state.compare_exchange_strong(expected, slot_busy, std::memory_order_acq_rel))
            ::unlink(slot.path);
    }
}

void stop_and_remove_temporaries() noexcept {
    stopping.store(true);
    // A thread between its check of `stopping` and its open() is given up to 2 s to put
    // its (registered) file on disk, so that the sweep below finds it. The thread this
    // handler interrupted cannot move on: its open() has not happened, and never will.
    const int others = this_thread_creating ? 1 : 0;
    for (int i = 0; i < 2000 && creating.load() > others; ++i) {
        struct timespec ms {0, 1000000};
        ::nanosleep(&ms, nullptr);
    }
    remove_pending_temporaries();
}

bool stop_requested() noexcept { return stopping.load(std::memory_order_relaxed); }

void set_before_commit_hook(void (*hook)()) noexcept { before_commit_hook.store(hook); }

atomic_file::atomic_file(std::string path) : path_(std::move(path)), out_(nullptr) {
    if (path_.empty()) throw io_error(path_, "cannot write file (empty path)");
    int fd = -1;
    if (const int named = named_descriptor(path_); named >= 0) {
        fd = ::fcntl(named, F_DUPFD_CLOEXEC, 3);
        if (fd < 0) fail(path_, errno);
        in_place_ = true;
    } else {
        mode_t mode = 0666 & ~current_umask();
        struct stat st {};
        if (::stat(path_.c_str(), &st) == 0) {
            if (S_ISDIR(st.st_mode)) fail(path_, EISDIR);
            // A read-only destination is refused, as cp refuses it, and left as it is:
            // replacing it through the directory would ignore its mode. Root passes
            // access(2), so a file nobody may write is refused by its mode too.
            if (S_ISREG(st.st_mode) && ((st.st_mode & 0222) == 0 || ::access(path_.c_str(), W_OK) != 0))
                fail(path_, EACCES);
            mode = st.st_mode & 07777;
            // A device, FIFO or socket is written in place, as cp and sort -o do: replacing
            // /dev/null with a regular file, or a FIFO its reader never sees, destroys it.
            in_place_ = !S_ISREG(st.st_mode);
        }
        if (in_place_) {
            fd = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
            if (fd < 0) fail(path_, errno);
        } else {
            // A symbolic link stays a link: the file it points to is replaced.
            target_ = resolve_links(path_);
            // Unnamed until commit() where the filesystem allows; else named from the start.
            fd = stopping.load() ? -1 : create_unnamed(target_);
            unnamed_ = fd >= 0;
            if (!unnamed_) fd = create_temporary(target_, temp_, slot_);
            if (fd < 0) fail(path_, errno == EINTR ? ECANCELED : errno);
            // The temporary is created 0600; give it the mode the destination should keep.
            ::fchmod(fd, mode);
        }
    }
    buf_ = std::make_unique<__gnu_cxx::stdio_filebuf<char>>(fd, std::ios::out | std::ios::binary, 1 << 16);
    out_.rdbuf(buf_.get());
}

atomic_file::~atomic_file() {
    if (committed_) return;
    if (buf_) buf_->close();  // an unnamed temporary is gone with its descriptor
    if (in_place_ || temp_.empty()) return;
    ::unlink(temp_.c_str());
    unregister_temporary(slot_);
}

void atomic_file::commit() {
    if (committed_) return;
    errno = 0;
    out_.flush();
    int err = errno;
    bool ok = out_.good();
    if (ok && !unnamed_) {  // an unnamed temporary is closed once it has a name
        errno = 0;
        ok = buf_->close() != nullptr;
        err = errno;
    }
    if (in_place_) {
        committed_ = true;
        if (!ok) {
            if (buf_->is_open()) buf_->close();
            fail(path_, err ? err : EIO);
        }
        return;
    }
    if (ok && unnamed_) {
        // The data is in the file: name it (the descriptor is still open), then close.
        errno = 0;
        ok = link_temporary(buf_->fd(), target_, temp_, slot_) == 0;
        err = ok ? 0 : errno == EINTR ? ECANCELED : errno;
        if (!ok) temp_.clear();  // no name of ours: nothing to unlink
        if (ok) {
            errno = 0;
            ok = buf_->close() != nullptr;
            err = errno;
        }
    }
    if (ok)
        if (const auto hook = before_commit_hook.load()) hook();
    if (ok) {
        err = replace_file(temp_, target_);
        ok = err == 0;
    }
    if (!ok) {
        if (buf_->is_open()) buf_->close();
        if (!temp_.empty()) ::unlink(temp_.c_str());
        unregister_temporary(slot_);
        committed_ = true;  // nothing left for the destructor to remove
        fail(path_, err ? err : EIO);
    }
    committed_ = true;
    unregister_temporary(slot_);
}

bool written_in_place(const std::string& path) noexcept {
    if (named_descriptor(path) >= 0) return true;
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

}  // namespace attn::io
