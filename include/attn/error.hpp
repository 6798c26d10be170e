#pragma once
/// \file error.hpp
/// The typed errors the attn library throws. Only the command line catches them:
/// it prints `attn: error: <what()>` on one line and maps the type to an exit code
/// (usage_error → 2, every other attn::error → 1).

#include <stdexcept>
#include <string>

namespace attn {

/// Base of every attn error. what() is "<source>: <message>", where source names the
/// file, option or tensor the problem is in (empty source → just the message).
class error : public std::runtime_error {
public:
    error(const std::string& source, const std::string& message)
        : std::runtime_error(source.empty() ? message : source + ": " + message),
          source_(source), message_(message) {}
    const std::string& source() const noexcept { return source_; }
    const std::string& message() const noexcept { return message_; }

private:
    std::string source_;
    std::string message_;
};

/// A file cannot be opened, read or written (missing, permission, short read, disk full).
class io_error : public error { using error::error; };

/// A file's content is malformed: bad .npy magic or header, broken zip, invalid JSON.
class format_error : public error { using error::error; };

/// Arrays have shapes that do not fit together (rank, Dk mismatch, heads not dividing).
class shape_error : public error { using error::error; };

/// Values are out of range or of the wrong kind (lengths > Tk, integer Q, unknown name).
class value_error : public error { using error::error; };

/// An input array or file is larger than `--max-bytes` (io/limits.hpp). A value_error
/// (exit code 1) that readers skipping arrays they cannot use must let through, so that
/// the limit holds for every array of a JSON file as it does for every .npz member.
class limit_error : public value_error { using value_error::value_error; };

/// The command line is wrong: unknown option value, conflicting options. Exit code 2.
class usage_error : public error { using error::error; };

/// "(expected <expected>, got <got>)" — the suffix every shape/value message ends with.
inline std::string expected_got(const std::string& expected, const std::string& got) {
    return "(expected " + expected + ", got " + got + ")";
}

}  // namespace attn
