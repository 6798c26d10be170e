// The members of io::checkpoint (include/attn/io/safetensors.hpp): opening a file or an
// index (header.cpp checks the headers), and loading tensors from the mapped data
// (mapping.cpp, convert.cpp).

#include "detail.hpp"

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <optional>

#include "attn/error.hpp"
#include "attn/io/limits.hpp"
#include "attn/io/safetensors.hpp"

namespace attn::io {

using namespace safetensors_detail;

checkpoint checkpoint::open(const std::string& path) {
    checkpoint c;
    c.state_ = std::make_shared<state>();
    c.state_->path = path;
    std::shared_ptr<region> bytes = map_file(path);
    const std::string_view head(reinterpret_cast<const char*>(bytes->data), std::min<std::size_t>(bytes->size, 64));
    if (!looks_like_safetensors(head) && (is_safetensors_index_name(path) || starts_with_brace(head))) {
        bytes.reset();
        open_index(*c.state_, path);
    } else {
        add_file(*c.state_, path, std::move(bytes), nullptr);
    }
    sort_entries(*c.state_);
    return c;
}

checkpoint checkpoint::read(std::string bytes, const std::string& source) {
    checkpoint c;
    c.state_ = std::make_shared<state>();
    c.state_->path = source;
    add_file(*c.state_, source, hold(std::move(bytes)), nullptr);
    sort_entries(*c.state_);
    return c;
}

const std::vector<tensor_entry>& checkpoint::tensors() const { return state_->entries; }

const tensor_entry* checkpoint::find(const std::string& name) const {
    const auto& e = state_->entries;
    auto it = std::lower_bound(e.begin(), e.end(), name, [](const tensor_entry& a, const std::string& n) { return a.name < n; });
    return it != e.end() && it->name == name ? &*it : nullptr;
}

const std::map<std::string, std::string>& checkpoint::metadata() const { return state_->metadata; }

const std::string& checkpoint::path() const { return state_->path; }

std::size_t checkpoint::bytes_loaded() const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->bytes_loaded;
}

const tensor_entry& checkpoint::counted(const std::string& name) const {
    const state& s = *state_;
    const tensor_entry* e = find(name);
    if (!e) throw value_error(s.path, "no tensor named " + in_quotes(name) + " in the checkpoint");
    const std::optional<dtype> type = loaded_type(e->dtype);
    if (!type)
        throw value_error(s.path + ":" + name,
                          "dtype " + e->dtype + " is not read by attn " +
                              expected_got("F64, F32, F16, BF16, F8_E4M3, F8_E5M2, an integer type or BOOL", e->dtype));
    const std::size_t stored = e->end - e->begin;
    check_array_bytes(stored, s.path + ":" + name);
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        if (s.loaded.insert(name).second) {
            s.bytes_loaded += stored;
            if (s.bytes_loaded > max_array_bytes()) {
                const std::size_t total = s.bytes_loaded;
                s.bytes_loaded -= stored;
                s.loaded.erase(name);
                check_file_bytes(total, s.path);
            }
        }
    }
    return *e;
}

array checkpoint::load_rows(const std::string& name, const std::vector<std::size_t>& rows) const {
    const state& s = *state_;
    const tensor_entry* e = &counted(name);
    if (e->shape.empty())
        throw value_error(s.path + ":" + name, "has no rows " + expected_got("a tensor of rank ≥ 1", "a 0-d tensor"));
    const dtype type = *loaded_type(e->dtype);
    const auto& shard = s.shards[s.shard_of[static_cast<std::size_t>(e - s.entries.data())]];
    const std::byte* p = shard.bytes->data + shard.data_start + e->begin;
    const std::size_t n = e->shape[0];
    const std::size_t row_count = n ? element_count(e->shape) / n : 0;  // elements of one row
    const std::size_t row_stored = n ? (e->end - e->begin) / n : 0;     // its bytes as stored
    for (std::size_t r : rows)
        if (r >= n)
            throw value_error(s.path + ":" + name, "row out of range " + expected_got("0 to " + std::to_string(n) + " − 1", std::to_string(r)));
    const std::size_t row_bytes = converted_to_f32(e->dtype) ? row_count * sizeof(float) : row_stored;
    array a;
    a.type = type;
    a.shape = e->shape;
    a.shape[0] = rows.size();
    std::vector<std::byte> out(rows.size() * row_bytes);
    read_guarded(*shard.bytes, [&] {
        for (std::size_t i = 0; i < rows.size(); ++i)
            copy_as_loaded(e->dtype, p + rows[i] * row_stored, row_count, row_stored, out.data() + i * row_bytes);
    });
    // Each row read faults in its neighbours too (the kernel maps 64 KiB around a fault):
    // T rows of a large table would leave up to T × 64 KiB of it resident.
    release_copied_pages(*shard.bytes, p, e->end - e->begin);
    a.data = byte_buffer(std::move(out));
    return a;
}

array checkpoint::load(const std::string& name) const {
    const state& s = *state_;
    const tensor_entry* e = &counted(name);
    const std::optional<dtype> type = loaded_type(e->dtype);
    const std::size_t stored = e->end - e->begin;
    const auto& shard = s.shards[s.shard_of[static_cast<std::size_t>(e - s.entries.data())]];
    const std::byte* p = shard.bytes->data + shard.data_start + e->begin;
    const std::size_t count = element_count(e->shape);

    const region& mapped = *shard.bytes;

    array a;
    a.type = *type;
    a.shape = e->shape;
    const std::size_t width = dtype_size(*type);
    if (converted_to_f32(e->dtype) || *type == dtype::b1) {
        std::vector<std::byte> out(converted_to_f32(e->dtype) ? count * sizeof(float) : stored);
        read_guarded(mapped, [&] { copy_as_loaded(e->dtype, p, count, stored, out.data()); });
        release_copied_pages(mapped, p, stored);
        a.data = byte_buffer(std::move(out));
        return a;
    }
    // A writer need not align the data to the element width (the reference writer pads
    // the header to 8 bytes, others may not): an unaligned tensor is copied.
    // A view's pages are touched here, one byte a page, so that a file truncated since it
    // was opened is reported now; one truncated later, while attn computes, faults in the
    // reader, which end_process_on_lost_mapping() turns into one line and exit status 1.
    if (reinterpret_cast<std::uintptr_t>(p) % width == 0) {
        read_guarded(mapped, [&] {
            volatile unsigned char sink = 0;
            for (std::size_t i = 0; i < stored; i += 4096) sink = sink ^ std::to_integer<unsigned char>(p[i]);
            if (stored > 0) sink = sink ^ std::to_integer<unsigned char>(p[stored - 1]);
        });
        a.data = byte_buffer::view(std::shared_ptr<const void>(shard.bytes, shard.bytes.get()), p, stored);
    } else {
        std::vector<std::byte> out(stored);
        read_guarded(mapped, [&] { copy_as_loaded(e->dtype, p, count, stored, out.data()); });
        release_copied_pages(mapped, p, stored);
        a.data = byte_buffer(std::move(out));
    }
    return a;
}

}  // namespace attn::io
