#pragma once
/// \file read_only_file.hpp
/// A file opened for reading in place (mapped, or read as it streams), with what fstat(2)
/// says of it, closed when it goes out of scope.

#include <sys/stat.h>

#include <new>
#include <string>

namespace attn::io {

/// A descriptor opened with O_RDONLY | O_CLOEXEC and the fstat(2) of its file, closed by
/// the destructor (also when the constructor throws after opening). Not copyable.
class read_only_file {
public:
    /// Opens `path` and fstat's it. Throws io_error(path, "cannot open file (<strerror>)")
    /// when open(2) fails, io_error(path, "cannot read file (<strerror>)") when fstat(2)
    /// fails, and io_error(path, "cannot read file (Is a directory)") for a directory;
    /// any other kind of file (a FIFO, a device) is the caller's to judge.
    explicit read_only_file(const std::string& path);

    /// The same without throwing: fd() is -1 when open(2) or fstat(2) fails, and a
    /// directory is not refused.
    read_only_file(const std::string& path, std::nothrow_t);

    read_only_file(const read_only_file&) = delete;
    read_only_file& operator=(const read_only_file&) = delete;

    /// The open descriptor, or -1 (the nothrow form, when opening failed).
    int fd() const { return file_.fd; }

    /// What fstat(2) said of the file (all zero when fd() is -1).
    const struct stat& status() const { return st_; }

private:
    struct closer {
        int fd = -1;
        ~closer();
    } file_;
    struct stat st_ {};
};

}  // namespace attn::io
