// The bytes of a safetensors file (detail.hpp): a read-only mapping, or the whole content
// held in memory, and the SIGBUS guard that turns a mapping whose file shrank into one
// message.

#include "detail.hpp"

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "attn/error.hpp"
#include "attn/io/input.hpp"
#include "attn/io/output.hpp"
#include "attn/io/read_only_file.hpp"

namespace attn::io {

namespace safetensors_detail {

namespace {

// The mappings alive now, for the SIGBUS handler to tell a fault in a view of one (a file
// truncated while attn computes on it) from any other: a fixed table of atomic slots, read
// without a lock in the handler. A mapping that finds no free slot is not listed (its
// fault keeps the default action).
constexpr std::size_t mapping_slots = 4 * safetensors_max_shards;
std::array<std::atomic<const region*>, mapping_slots> live_mappings{};

void enlist(const region* r) {
    for (auto& slot : live_mappings) {
        const region* empty = nullptr;
        if (slot.compare_exchange_strong(empty, r)) return;
    }
}

/// The live mapping holding `address`, or nullptr. Async-signal-safe.
const region* mapping_at(const void* address) {
    const auto* a = static_cast<const std::byte*>(address);
    for (const auto& slot : live_mappings) {
        const region* r = slot.load(std::memory_order_acquire);
        if (r && a >= r->data && a < r->data + r->size) return r;
    }
    return nullptr;
}

}  // namespace

region::~region() {
    if (!mapped) return;
    for (auto& slot : live_mappings) {
        const region* self = this;
        if (slot.compare_exchange_strong(self, nullptr)) break;
    }
    ::munmap(mapped, size);
}

std::shared_ptr<region> hold(std::string bytes) {
    auto r = std::make_shared<region>();
    r->held = std::move(bytes);
    r->data = reinterpret_cast<const std::byte*>(r->held.data());
    r->size = r->held.size();
    return r;
}

std::shared_ptr<region> map_file(const std::string& path) {
    const read_only_file file(path);
    const int fd = file.fd();
    const struct stat& st = file.status();
    if (!S_ISREG(st.st_mode)) return hold(read_file(path));
    auto r = std::make_shared<region>();
    r->size = static_cast<std::size_t>(st.st_size);
    if (r->size == 0) return r;  // mmap refuses length 0; the header check says what is wrong
    void* p = ::mmap(nullptr, r->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) throw io_error(path, std::string("cannot map file (") + std::strerror(errno) + ")");
    r->mapped = p;
    r->data = static_cast<const std::byte*>(p);
    r->path = path;
    enlist(r.get());
    return r;
}

// A mapped file that shrinks after it was mapped (another process truncating a
// checkpoint being written) makes a read of the lost pages raise SIGBUS. load() checks the
// size first, then reads inside a guard that turns a SIGBUS in the reading thread into an
// io_error. A fault outside the guard, in a view of a mapping read later, ends the process
// with one line once end_process_on_lost_mapping() has asked for it; any other SIGBUS goes
// to the handler that was installed before.
thread_local sigjmp_buf* bus_jump = nullptr;

namespace {

struct sigaction previous_bus_action {};
std::atomic<const char*> lost_mapping_prefix{nullptr};

/// Appends `text` to line[0, len) within `cap` bytes. Async-signal-safe.
void append(char* line, std::size_t& len, std::size_t cap, const char* text) {
    for (; *text && len < cap; ++text) line[len++] = *text;
}

/// Appends `n` in decimal. Async-signal-safe (no snprintf).
void append_number(char* line, std::size_t& len, std::size_t cap, std::size_t n) {
    char digits[24];
    std::size_t k = 0;
    do {
        digits[k++] = static_cast<char>('0' + n % 10);
        n /= 10;
    } while (n);
    while (k && len < cap) line[len++] = digits[--k];
}

/// The one line of a fault in a lost mapping, as the guarded read's io_error says it,
/// the temporaries removed, then exit status 1. Async-signal-safe calls only.
[[noreturn]] void end_on_lost_mapping(const region& r, const char* prefix) {
    stop_and_remove_temporaries();
    char line[4096];
    std::size_t len = 0;
    constexpr std::size_t cap = sizeof line - 1;
    append(line, len, cap, prefix);
    append(line, len, cap, r.path.c_str());
    append(line, len, cap, ": file changed while being read (expected ");
    append_number(line, len, cap, r.size);
    append(line, len, cap, " bytes, as when it was opened, got fewer (bus error reading its data))");
    line[len++] = '\n';
    [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, line, len);
    _exit(1);
}

extern "C" void on_bus_error(int sig, siginfo_t* info, void* context) {
    if (bus_jump) siglongjmp(*bus_jump, 1);
    if (const char* prefix = lost_mapping_prefix.load())
        if (const region* r = info ? mapping_at(info->si_addr) : nullptr) end_on_lost_mapping(*r, prefix);
    if (previous_bus_action.sa_flags & SA_SIGINFO) {
        if (previous_bus_action.sa_sigaction) previous_bus_action.sa_sigaction(sig, info, context);
        return;
    }
    if (previous_bus_action.sa_handler != SIG_DFL && previous_bus_action.sa_handler != SIG_IGN) {
        previous_bus_action.sa_handler(sig);
        return;
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

}  // namespace

void install_bus_handler() {
    static std::once_flag installed;
    std::call_once(installed, [] {
        struct sigaction sa {};
        sa.sa_sigaction = on_bus_error;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, &previous_bus_action);
    });
}

[[noreturn]] void file_changed(const region& r, const std::string& got) {
    throw io_error(r.path, "file changed while being read " +
                               expected_got(std::to_string(r.size) + " bytes, as when it was opened", got));
}

void release_copied_pages(const region& r, const std::byte* p, std::size_t n) {
    if (!r.mapped || n == 0) return;
    static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto from = (reinterpret_cast<std::uintptr_t>(p) + page - 1) / page * page;
    const auto to = (reinterpret_cast<std::uintptr_t>(p) + n) / page * page;
    if (from < to) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
}

}  // namespace safetensors_detail

using namespace safetensors_detail;

void end_process_on_lost_mapping(const char* prefix) {
    lost_mapping_prefix.store(prefix);
    install_bus_handler();
}

}  // namespace attn::io
