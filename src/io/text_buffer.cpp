#include "text_buffer.hpp"

#include "attn/threads.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <ostream>
#include <system_error>
#include <thread>

#include "attn/error.hpp"
#include "attn/tensor.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace attn::io::detail {

namespace {

/// errno is read right after the failed write, while it still describes it.
[[noreturn]] void write_failed() {
    const int err = errno;
    throw io_error("", err ? "cannot write output (" + std::system_category().message(err) + ")"
                           : std::string("cannot write output"));
}

}  // namespace

void check_layout(const std::string& name, const array& a) {
    const std::size_t expected = a.size() * dtype_size(a.type);
    if (a.data.size() != expected)
        throw value_error(name, "data size does not match dtype and shape " +
                                    expected_got(std::to_string(expected) + " bytes for " +
                                                     std::string(dtype_name(a.type)) + " " +
                                                     shape_string(a.shape),
                                                 std::to_string(a.data.size())));
}

text_buffer::text_buffer(std::ostream* out, std::size_t chunk) : out_(out), data_(chunk) {}

void text_buffer::make_room(std::size_t n) {
    if (out_ && size_ > 0) flush();
    if (size_ + n > data_.size()) data_.resize(std::max(data_.size() * 2, size_ + n));
}

void text_buffer::append(std::string_view s) {
    if (out_ && s.size() >= data_.size()) {
        // Large pieces (blocks from worker threads) skip the copy.
        flush();
        errno = 0;
        out_->write(s.data(), static_cast<std::streamsize>(s.size()));
        if (!*out_) write_failed();
        return;
    }
    std::memcpy(reserve(s.size()), s.data(), s.size());
    size_ += s.size();
}

void text_buffer::newline(int indent) {
    const std::size_t n = static_cast<std::size_t>(indent) + 1;
    char* p = reserve(n);
    p[0] = '\n';
    std::memset(p + 1, ' ', n - 1);
    size_ += n;
}

void text_buffer::flush() {
    if (!out_ || size_ == 0) return;
    errno = 0;
    out_->write(data_.data(), static_cast<std::streamsize>(size_));
    size_ = 0;
    if (!*out_) write_failed();
}

void text_buffer::finish() {
    flush();
    if (!out_) return;
    errno = 0;
    out_->flush();
    if (!*out_) write_failed();
}

namespace {

/// Formats blocks of rows on helper threads while the calling thread writes them in
/// order (and formats blocks itself when there is nothing to write). Waits block on a
/// condition variable: spinning OpenMP barriers measured 2–5× slower than one thread
/// on this shared 2-core machine. A ring of 2 buffers per thread bounds the memory.
class block_pipeline {
public:
    block_pipeline(text_buffer& out, std::size_t rows, std::size_t block_rows, const row_emitter& emit,
                   int threads)
        : out_(out), emit_(emit), rows_(rows), block_rows_(block_rows),
          blocks_((rows + block_rows - 1) / block_rows),
          slots_(2 * static_cast<std::size_t>(threads)), threads_(threads) {}

    void run() {
        std::vector<std::thread> helpers;
        try {
            for (int t = 1; t < threads_; ++t) helpers.emplace_back([this] { help(); });
        } catch (const std::system_error&) {
            // No thread to spare: the calling thread formats everything itself.
        }
        write_all();
        {
            std::lock_guard<std::mutex> lock(mutex_);
            done_ = true;
        }
        changed_.notify_all();
        for (std::thread& t : helpers) t.join();
        if (failure_) std::rethrow_exception(failure_);
    }

private:
    enum class state { free, busy, ready };
    struct slot {
        text_buffer text{nullptr};
        state status = state::free;
    };

    /// Block i goes into slot i mod K, which is free once block i − K is written.
    bool claimable() const {
        return next_block_ < blocks_ && slots_[next_block_ % slots_.size()].status == state::free;
    }

    /// Claims the next block under the lock, formats it without. Returns false on error.
    bool format_next(std::unique_lock<std::mutex>& lock) {
        const std::size_t i = next_block_++;
        slot& s = slots_[i % slots_.size()];
        s.status = state::busy;
        lock.unlock();
        std::exception_ptr error;
        try {
            const std::size_t first = i * block_rows_;
            s.text.clear();
            emit_(s.text, first, std::min(rows_, first + block_rows_));
        } catch (...) {
            error = std::current_exception();
        }
        lock.lock();
        if (error && !failure_) failure_ = error;
        if (!error) s.status = state::ready;
        changed_.notify_all();
        return !error;
    }

    void help() {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            changed_.wait(lock, [this] { return failure_ || done_ || next_block_ >= blocks_ || claimable(); });
            if (failure_ || done_ || next_block_ >= blocks_) return;
            if (!format_next(lock)) return;
        }
    }

    void write_all() {
        std::unique_lock<std::mutex> lock(mutex_);
        while (next_written_ < blocks_ && !failure_) {
            slot& s = slots_[next_written_ % slots_.size()];
            if (s.status == state::ready) {
                lock.unlock();
                std::exception_ptr error;
                try {
                    out_.append(s.text.view());
                } catch (...) {
                    error = std::current_exception();
                }
                lock.lock();
                if (error) {
                    failure_ = error;
                } else {
                    s.status = state::free;
                    ++next_written_;
                }
                changed_.notify_all();
            } else if (claimable()) {
                format_next(lock);
            } else {
                changed_.wait(lock);
            }
        }
    }

    text_buffer& out_;
    const row_emitter& emit_;
    const std::size_t rows_, block_rows_, blocks_;
    std::vector<slot> slots_;
    const int threads_;

    std::mutex mutex_;
    std::condition_variable changed_;
    std::size_t next_block_ = 0;    ///< next block to format
    std::size_t next_written_ = 0;  ///< next block to write
    bool done_ = false;
    std::exception_ptr failure_;
};

}  // namespace

void emit_rows(text_buffer& out, std::size_t rows, std::size_t row_cost, const row_emitter& emit) {
    // A block of ~16 Ki numbers is ~200 KB of text: large enough to amortise the
    // hand-over between threads, small enough that the ring stays within a few MB.
    // Rows longer than max_row_cost are not split, so such tensors stay sequential.
    constexpr std::size_t block_elements = std::size_t{1} << 14;
    constexpr std::size_t parallel_min = std::size_t{1} << 16;
    constexpr std::size_t max_row_cost = std::size_t{1} << 20;
    const std::size_t cost = std::max<std::size_t>(row_cost, 1);
    const std::size_t block_rows = std::max<std::size_t>(1, block_elements / cost);
    const std::size_t blocks = (rows + block_rows - 1) / block_rows;

    // The one thread policy (attn/threads.hpp): OpenMP's setting, 1 inside a parallel
    // region, and whatever a batch worker set for itself (1).
    const int threads = thread_budget();
    if (threads < 2 || blocks < 2 || rows * cost < parallel_min || cost > max_row_cost) {
        emit(out, 0, rows);
        return;
    }
    block_pipeline(out, rows, block_rows, emit, threads).run();
}

}  // namespace attn::io::detail
