#pragma once
// Private to attn view's page (html.cpp, html/data.cpp, html/page.cpp): the stages as
// quantised, deflated chunks and the records the page's data keeps of them (data.cpp),
// and the page around them (page.cpp).

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include "attn/error.hpp"
#include "attn/io/document.hpp"
#include "attn/tensor.hpp"

namespace attn::io::html_detail {

/// A stage seen as (L, B, H, Tq, Tk).
struct stage_dims {
    std::size_t L = 1, B = 1, H = 1, Tq = 1, Tk = 1;
    std::size_t cells() const { return L * B * H * Tq * Tk; }
};

stage_dims dims_of(const document& doc, const named_array& t);
std::vector<const named_array*> viewed(const document& doc);
std::vector<char> page_masked(const document& doc, const named_array& t);

/// What a stage (or the rollout) of the page records of itself, apart from its codes: its
/// dimensions (L = the layers it has in all) and each layer's range as its chunk was
/// written.
struct stage_record {
    std::string name;
    stage_dims d;
    bool unit_range = false;              // weights, word weights and rollout: coloured over [0, 1]
    std::vector<std::array<double, 2>> layers;  // each layer's [lo, hi]
    std::vector<char> finite;                   // whether that layer had a cell not masked
};

/// Base64 (RFC 4648, with padding) written as the bytes come: whole groups of three at
/// once, the last one or two bytes held until finish().
class base64_writer {
public:
    explicit base64_writer(std::ostream& out) : out_(out) {}
    void add(const unsigned char* bytes, std::size_t n) {
        std::size_t i = 0;
        while (held_ < 3 && i < n && held_ > 0) group_[held_++] = bytes[i++];
        if (held_ == 3) emit(group_), held_ = 0;
        std::string text;
        text.reserve((n - i) / 3 * 4);
        for (; i + 2 < n; i += 3) text.append(encode(bytes + i));
        out_ << text;
        for (; i < n; ++i) group_[held_++] = bytes[i];
    }
    void finish() {
        if (held_ == 0) return;
        const unsigned v = (group_[0] << 16) | (held_ > 1 ? group_[1] << 8 : 0);
        const char tail[4] = {table[v >> 18], table[(v >> 12) & 63], held_ > 1 ? table[(v >> 6) & 63] : '=', '='};
        out_.write(tail, 4);
        held_ = 0;
    }

private:
    static constexpr char table[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    static std::string encode(const unsigned char* b) {
        const unsigned v = (b[0] << 16) | (b[1] << 8) | b[2];
        return {table[v >> 18], table[(v >> 12) & 63], table[(v >> 6) & 63], table[v & 63]};
    }
    void emit(const unsigned char* b) { out_ << encode(b); }
    std::ostream& out_;
    unsigned char group_[3] = {};
    std::size_t held_ = 0;
};

/// One layer of a stage as one `<script class="attn-chunk">` of input `input`, stage `key`
/// (its index, or the rollout's stage name), layer `layer`, its cells coming in pieces
/// (add): each quantised to codes 0 … top−1 over [lo, hi] (given before the first cell),
/// top = masked or not finite, deflated (zlib's deflate, RFC 1950, which the page's
/// DecompressionStream("deflate") reads; level 1, as compress2 at level 1 gives it,
/// whatever the pieces) and base64-encoded as they come. finish() closes the chunk and
/// records the layer's range and whether any cell was not masked in `rec`.
class chunk_writer {
public:
    chunk_writer(std::ostream& out, std::size_t input, const std::string& key, std::size_t layer, double lo, double hi,
                 int bits, stage_record& rec)
        : out_(out), text_(out), lo_(lo), hi_(hi), bits_(bits), top_(bits == 16 ? 65535u : 255u), rec_(rec) {
        if (rec.layers.size() != layer) throw value_error(rec.name, "layers of the page out of order");
        if (deflateInit(&z_, 1) != Z_OK) throw io_error("view", "cannot compress the page's data (zlib)");
        // base64 holds no '<', so the chunk cannot close its script early.
        out << "<script type=\"application/octet-stream\" class=\"attn-chunk\" data-input=\"" << input << "\" data-stage=\""
            << key << "\" data-layer=\"" << layer << "\">";
    }
    ~chunk_writer() { deflateEnd(&z_); }
    chunk_writer(const chunk_writer&) = delete;
    chunk_writer& operator=(const chunk_writer&) = delete;

    /// Cells [begin, begin + n) of `a`, masked where `masked[i]` (when given), where 0 when
    /// `zeros` (lone weights: masked_cells), or where not finite.
    void add(const array& a, std::size_t begin, std::size_t n, const char* masked, bool zeros = false) {
        if (a.type == dtype::f4 && !a.data.empty())
            add_values(reinterpret_cast<const float*>(a.data.data()) + begin, n, masked, zeros);
        else if (a.type == dtype::f8 && !a.data.empty())
            add_values(reinterpret_cast<const double*>(a.data.data()) + begin, n, masked, zeros);
        else
            add_values([&](std::size_t i) { return a.value(begin + i); }, n, masked, zeros);
    }

    /// Ends the deflate stream and the chunk; records the layer in `rec`.
    void finish() {
        compress(nullptr, 0, Z_FINISH);
        text_.finish();
        out_ << "</script>\n";
        rec_.layers.push_back({lo_, hi_});
        rec_.finite.push_back(any_ ? 1 : 0);
    }

private:
    template <class T>
    void add_values(const T* values, std::size_t n, const char* masked, bool zeros) {
        add_values([values](std::size_t i) { return static_cast<double>(values[i]); }, n, masked, zeros);
    }
    template <class F>
    void add_values(F value, std::size_t n, const char* masked, bool zeros) {
        raw_.resize(n * static_cast<std::size_t>(bits_ / 8));
        for (std::size_t i = 0; i < n; ++i) {
            const double v = value(i);
            unsigned q = top_;
            if (!(masked && masked[i]) && !(zeros && v == 0) && std::isfinite(v)) {
                any_ = true;
                const double x = hi_ > lo_ ? (v - lo_) / (hi_ - lo_) : 0.0;
                q = static_cast<unsigned>(std::lround(std::clamp(x, 0.0, 1.0) * (top_ - 1)));
            }
            if (bits_ == 16) {
                raw_[2 * i] = static_cast<unsigned char>(q & 0xff);  // little-endian, as Uint16Array reads it
                raw_[2 * i + 1] = static_cast<unsigned char>(q >> 8);
            } else {
                raw_[i] = static_cast<unsigned char>(q);
            }
        }
        compress(raw_.data(), raw_.size(), Z_NO_FLUSH);
    }
    void compress(const unsigned char* in, std::size_t n, int flush) {
        std::array<unsigned char, 1 << 16> buf;
        // zlib counts in uInt: a piece of more than 4 GiB goes in parts.
        do {
            const std::size_t part = std::min<std::size_t>(n, std::size_t{1} << 30);
            z_.next_in = const_cast<unsigned char*>(in);
            z_.avail_in = static_cast<uInt>(part);
            in += part, n -= part;
            const int mode = n ? Z_NO_FLUSH : flush;
            int status;
            do {
                z_.next_out = buf.data();
                z_.avail_out = static_cast<uInt>(buf.size());
                status = deflate(&z_, mode);
                if (status == Z_STREAM_ERROR) throw io_error("view", "cannot compress the page's data (zlib)");
                text_.add(buf.data(), buf.size() - z_.avail_out);
            } while (z_.avail_out == 0 || (mode == Z_FINISH && status != Z_STREAM_END));
        } while (n);
    }
    std::ostream& out_;
    base64_writer text_;
    double lo_, hi_;
    int bits_;
    unsigned top_;
    stage_record& rec_;
    z_stream z_{};
    std::vector<unsigned char> raw_;
    bool any_ = false;
};

void write_chunk(std::ostream& out, std::size_t input, const std::string& key, std::size_t layer, const array& a,
                 std::size_t begin, std::size_t n, std::vector<char> masked, int bits, stage_record& rec);
nlohmann::ordered_json stage_json(const stage_record& rec, int bits);
const named_array* shown_rollout(const document& doc, const std::string& first, const stage_dims& weights,
                                 stage_dims* dims = nullptr);
const named_array* shown_rollout(const document& doc, const std::vector<const named_array*>& stages,
                                 stage_dims* dims = nullptr);
nlohmann::ordered_json head_stat_rows(const document& doc);
std::size_t viewed_cells(const document& doc, const std::string& source, std::size_t& rollout);

/// One input's chunks and the records the page's data keeps of them.
struct input_page {
    std::vector<stage_record> stages;
    std::optional<stage_record> rollout;
};

stage_record record_of(const document& doc, const named_array& t, std::size_t layers);
void write_rollout_chunk(std::ostream& out, const document& doc, std::size_t input, int bits, input_page& page);
input_page write_input_chunks(std::ostream& out, const document& doc, std::size_t input, int bits);
nlohmann::ordered_json input_data(const document& doc, const input_page& page, int bits, nlohmann::ordered_json head_stats);

// The page around the chunks (page.cpp).
std::string meta_html(const nlohmann::ordered_json& meta, const std::string& attributes = " id=\"meta\"");
void write_page_head(std::ostream& out, const std::string& source);
void write_page_tail(std::ostream& out, const std::string& source, const std::string& settings, bool many, int bits,
                     bool any_rollout, nlohmann::ordered_json data);

}  // namespace attn::io::html_detail
