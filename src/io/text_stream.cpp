// Text outputs of several layers written layer by layer (include/attn/io/text_stream.hpp,
// docs/design.md §5.4).
#include "attn/io/text_stream.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ext/stdio_filebuf.h>
#include <filesystem>
#include <ostream>
#include <system_error>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/csv.hpp"
#include "attn/io/json.hpp"

namespace attn::io {

namespace {

std::string reason(int err) { return std::system_category().message(err); }

/// A nameless file in `dir`: O_TMPFILE where the filesystem has it, else a mkstemp name
/// unlinked at once. Returns the descriptor, or -1 with errno set.
int nameless_file(const std::string& dir) {
#ifdef O_TMPFILE
    const int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) return fd;
    // EOPNOTSUPP / EISDIR / EINVAL: no O_TMPFILE here; the fallback says what else is wrong.
#endif
    std::string name = (dir.empty() ? std::string(".") : dir) + "/.attn-spool-XXXXXX";
    const int tmp = ::mkostemp(name.data(), O_CLOEXEC);
    if (tmp < 0) return -1;
    ::unlink(name.c_str());
    return tmp;
}

}  // namespace

struct spool::impl {
    std::string beside;
    int fd = -1;
    std::unique_ptr<__gnu_cxx::stdio_filebuf<char>> buf;
    std::ostream out{nullptr};
};

spool::spool(const std::string& beside) : p_(std::make_unique<impl>()) {
    p_->beside = beside;
    const std::filesystem::path dir = std::filesystem::path(beside).parent_path();
    p_->fd = nameless_file(dir.empty() ? "." : dir.string());
    if (p_->fd < 0) throw io_error(beside, "cannot create a temporary file (" + reason(errno) + ")");
    // The filebuf does not own the descriptor: ~spool closes it.
    p_->buf = std::make_unique<__gnu_cxx::stdio_filebuf<char>>(p_->fd, std::ios::in | std::ios::out | std::ios::binary, 1 << 16);
    p_->out.rdbuf(p_->buf.get());
}

spool::~spool() {
    p_->out.rdbuf(nullptr);
    p_->buf.reset();  // stdio_filebuf(fd, …) closes the descriptor it was given
}

std::ostream& spool::stream() { return p_->out; }

void spool::copy_to(std::ostream& out) {
    p_->out.flush();
    if (!p_->out) throw io_error(p_->beside, "cannot write a temporary file (" + reason(errno ? errno : EIO) + ")");
    if (::lseek(p_->fd, 0, SEEK_SET) < 0) throw io_error(p_->beside, "cannot read a temporary file (" + reason(errno) + ")");
    std::vector<char> chunk(std::size_t{1} << 20);
    for (;;) {
        const ssize_t n = ::read(p_->fd, chunk.data(), chunk.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw io_error(p_->beside, "cannot read a temporary file (" + reason(errno) + ")");
        if (n == 0) break;
        out.write(chunk.data(), n);
        if (!out) return;
    }
}

csv_stream::csv_stream(std::ostream& out, std::string beside, std::size_t count, const text_style& style)
    : out_(out), beside_(std::move(beside)), count_(count), style_(style) {}

csv_stream::~csv_stream() = default;

void csv_stream::append(const document& layer, std::size_t number) {
    if (appended_ == 0) {
        check_csv_layer(layer, count_);
        for (const auto& t : layer.tensors) {
            names_.push_back(t.name);
            spools_.push_back(std::make_unique<spool>(beside_));
        }
    }
    bool same = layer.tensors.size() == names_.size();
    for (std::size_t i = 0; same && i < names_.size(); ++i) same = layer.tensors[i].name == names_[i];
    if (!same || appended_ >= count_) {
        std::string got;
        for (const auto& t : layer.tensors) got += (got.empty() ? "" : ", ") + t.name;
        std::string want;
        for (const auto& n : names_) want += (want.empty() ? "" : ", ") + n;
        throw shape_error(layer.tensors.empty() ? std::string("csv") : layer.tensors.front().name,
                          "does not continue its streamed CSV " +
                              expected_got(appended_ >= count_ ? std::to_string(count_) + " layers" : want,
                                           appended_ >= count_ ? "another" : got));
    }
    for (std::size_t i = 0; i < names_.size(); ++i) {
        try {
            write_csv_layer(spools_[i]->stream(), layer, i, number, style_);
        } catch (const io_error& e) {
            if (!e.source().empty()) throw;
            throw io_error(beside_, e.message());  // a full disk, `ulimit -f`
        }
    }
    ++appended_;
}

void csv_stream::finish() {
    if (appended_ != count_)
        throw shape_error(names_.empty() ? std::string("csv") : names_.front(),
                          "streamed in part " + expected_got(std::to_string(count_) + " layers", std::to_string(appended_)));
    out_ << csv_header(true);
    for (auto& s : spools_) {
        s->copy_to(out_);
        s.reset();  // its disk space back before the next is copied
        if (!out_) break;
    }
    out_.flush();
    if (!out_) throw io_error("", "cannot write output (" + reason(errno ? errno : EIO) + ")");
}

json_stream::json_stream(std::ostream& out, std::string beside, std::size_t count, const text_style& style)
    : out_(out), beside_(std::move(beside)), count_(count), style_(style) {}

json_stream::~json_stream() = default;

void json_stream::append(const document& layer) {
    if (appended_ == 0) {
        for (const auto& t : layer.tensors) {
            named_array slot{t.name, {}};
            slot.value.type = t.value.type;
            slot.value.shape = t.value.shape;
            plan_.push_back(std::move(slot));
            spools_.push_back(std::make_unique<spool>(beside_));
        }
    }
    bool same = layer.tensors.size() == plan_.size() && appended_ < count_;
    for (std::size_t i = 0; same && i < plan_.size(); ++i)
        same = layer.tensors[i].name == plan_[i].name && layer.tensors[i].value.shape == plan_[i].value.shape;
    if (!same) {
        std::string want, got;
        for (const auto& t : plan_) want += (want.empty() ? "" : ", ") + t.name + " " + shape_string(t.value.shape);
        for (const auto& t : layer.tensors) got += (got.empty() ? "" : ", ") + t.name + " " + shape_string(t.value.shape);
        if (appended_ >= count_) want = std::to_string(count_) + " layers", got = "another";
        throw shape_error(layer.tensors.empty() ? std::string("json") : layer.tensors.front().name,
                          "does not continue its streamed JSON " + expected_got(want, got));
    }
    for (std::size_t i = 0; i < plan_.size(); ++i) {
        try {
            write_json_layer(spools_[i]->stream(), layer.tensors[i], appended_, style_);
        } catch (const io_error& e) {
            if (!e.source().empty()) throw;
            throw io_error(beside_, e.message());  // a full disk, `ulimit -f`
        }
    }
    ++appended_;
}

void json_stream::finish(const document& run) {
    if (appended_ != count_)
        throw shape_error(plan_.empty() ? std::string("json") : plan_.front().name,
                          "streamed in part " + expected_got(std::to_string(count_) + " layers", std::to_string(appended_)));
    document skeleton;
    skeleton.input = run.input;
    skeleton.meta = run.meta;
    skeleton.tokens = run.tokens;
    skeleton.tokens_kv = run.tokens_kv;
    skeleton.words = run.words;
    for (const auto& t : plan_) {
        named_array stacked{t.name, {}};
        stacked.value.type = t.value.type;
        stacked.value.shape = t.value.shape;
        stacked.value.shape.insert(stacked.value.shape.begin(), count_);
        skeleton.tensors.push_back(std::move(stacked));
    }
    write_json_joined(out_, skeleton, style_, [&](std::ostream& out, std::size_t i) {
        spools_[i]->copy_to(out);
        spools_[i].reset();  // its disk space back before the next is copied
    });
    out_.flush();
    if (!out_) throw io_error("", "cannot write output (" + reason(errno ? errno : EIO) + ")");
}

}  // namespace attn::io
