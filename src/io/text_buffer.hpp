#pragma once
// Private to the text writers (json_writer.cpp, csv.cpp, table.cpp): a chunked output
// buffer and an ordered, optionally parallel row formatter. Formatting numbers one
// `ostream <<` at a time is ~10× slower than to_chars into a buffer.

#include <cstddef>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace attn {
struct array;
}

namespace attn::io::detail {

/// Throws value_error naming `name` unless `a.data` holds exactly the bytes its dtype
/// and shape call for (writers index the bytes directly).
void check_layout(const std::string& name, const array& a);

/// Characters are formatted straight into `data_` and handed to the stream in chunks
/// of about `chunk` bytes. Without a stream the buffer just grows (used for blocks
/// formatted by worker threads).
class text_buffer {
public:
    static constexpr std::size_t default_chunk = std::size_t{1} << 16;

    explicit text_buffer(std::ostream* out, std::size_t chunk = default_chunk);

    /// Space for at least n more characters; fill some, then commit() how many.
    char* reserve(std::size_t n) {
        if (size_ + n > data_.size()) make_room(n);
        return data_.data() + size_;
    }
    void commit(std::size_t n) { size_ += n; }

    void put(char c) { *reserve(1) = c; ++size_; }
    void append(std::string_view s);
    /// '\n' followed by `indent` spaces.
    void newline(int indent);

    std::string_view view() const { return {data_.data(), size_}; }
    void clear() { size_ = 0; }

    /// Writes what is buffered to the stream. Throws io_error if the stream fails.
    void flush();
    /// flush(), then flushes the stream itself and checks it. Throws io_error.
    void finish();

private:
    void make_room(std::size_t n);

    std::ostream* out_;
    std::vector<char> data_;
    std::size_t size_ = 0;
};

/// Signature of a row formatter: writes rows [first, last) into the buffer.
using row_emitter = std::function<void(text_buffer&, std::size_t first, std::size_t last)>;

/// Formats rows [0, rows) with `emit` into `out`, in order. When the work is large
/// (rows × row_cost elements) and OpenMP has threads to spare, blocks of rows are
/// formatted in parallel into per-thread buffers and written in order, so the extra
/// memory stays at a few MB whatever the tensor size. `emit` must produce text that
/// depends only on the row indices (not on what was written before).
void emit_rows(text_buffer& out, std::size_t rows, std::size_t row_cost, const row_emitter& emit);

}  // namespace attn::io::detail
