#pragma once
// Where a subcommand's data goes: stdout ("" or "-"), or a file written atomically.

#include <functional>
#include <iostream>
#include <ostream>
#include <string>
#include <unistd.h>

#include "attn/error.hpp"
#include "attn/io/output.hpp"

namespace attn::cli {

/// True when `path` means standard output.
inline bool is_stdout(const std::string& path) { return path.empty() || path == "-"; }

/// Calls write(stream) on stdout or on an atomic_file for `path` (committed when write
/// returns). Binary data is refused on a terminal (usage_error). Throws io_error.
inline void write_output(const std::string& path, bool binary, const std::function<void(std::ostream&)>& write) {
    if (is_stdout(path)) {
        if (binary && isatty(STDOUT_FILENO))
            throw usage_error("--format", "binary output to a terminal " + expected_got("-o FILE or a redirect", "a terminal"));
        write(std::cout);
        std::cout.flush();
        if (!std::cout) throw io_error("<stdout>", "write failed");
        return;
    }
    io::atomic_file file(path);
    write(file.stream());
    file.commit();
}

}  // namespace attn::cli
