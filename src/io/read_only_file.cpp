// A file opened read-only (include/attn/io/read_only_file.hpp), with the messages every
// reader of a path gives when it cannot be opened.

#include "attn/io/read_only_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "attn/error.hpp"

namespace attn::io {

read_only_file::closer::~closer() {
    if (fd >= 0) ::close(fd);
}

read_only_file::read_only_file(const std::string& path) {
    file_.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (file_.fd < 0) throw io_error(path, std::string("cannot open file (") + std::strerror(errno) + ")");
    if (::fstat(file_.fd, &st_) != 0) throw io_error(path, std::string("cannot read file (") + std::strerror(errno) + ")");
    if (S_ISDIR(st_.st_mode)) throw io_error(path, std::string("cannot read file (") + std::strerror(EISDIR) + ")");
}

read_only_file::read_only_file(const std::string& path, std::nothrow_t) {
    file_.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (file_.fd >= 0 && ::fstat(file_.fd, &st_) != 0) {
        ::close(file_.fd);
        file_.fd = -1;
        st_ = {};
    }
}

}  // namespace attn::io
