// atomic_file and remove_pending_temporaries (attn/io/output.hpp).

#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_util.hpp"
#include "attn/error.hpp"
#include "attn/io/output.hpp"
#include "skip.hpp"

namespace {

/// A fresh directory under /tmp, removed (with its files) at scope exit.
struct scratch_dir {
    std::string path;
    scratch_dir() {
        path = attn_test::temp_dir();
    }
    ~scratch_dir() {
        for (const auto& name : entries()) ::unlink((path + "/" + name).c_str());
        ::rmdir(path.c_str());
    }
    std::vector<std::string> entries() const {
        std::vector<std::string> out;
        if (DIR* d = ::opendir(path.c_str())) {
            while (const dirent* e = ::readdir(d)) {
                const std::string name = e->d_name;
                if (name != "." && name != "..") out.push_back(name);
            }
            ::closedir(d);
        }
        return out;
    }
};

/// True when `dir`'s filesystem makes unnamed files (O_TMPFILE): atomic_file's temporary
/// then has no name until commit().
bool makes_unnamed_files(const std::string& dir) {
#ifdef O_TMPFILE
    const int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    ::close(fd);
    return true;
#else
    return false;
#endif
}

std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

}  // namespace

TEST_CASE("atomic_file: commit creates the file with the content and leaves no temporary") {
    scratch_dir dir;
    const std::string path = dir.path + "/out.json";
    {
        attn::io::atomic_file f(path);
        f.stream() << "{\"a\": 1}\n";
        if (makes_unnamed_files(dir.path)) {
            CHECK(dir.entries().empty());  // the temporary has no name while it is written
        } else {
            REQUIRE(dir.entries().size() == 1);  // only the temporary so far
            CHECK(dir.entries()[0].rfind("out.json.attn-", 0) == 0);
        }
        f.commit();
    }
    CHECK(slurp(path) == "{\"a\": 1}\n");
    CHECK(dir.entries() == std::vector<std::string>{"out.json"});
}

TEST_CASE("atomic_file: without commit there is no file and no temporary") {
    scratch_dir dir;
    {
        attn::io::atomic_file f(dir.path + "/out.csv");
        f.stream() << "partial";
    }
    CHECK(dir.entries().empty());
}

TEST_CASE("atomic_file: an existing file is replaced only on commit and keeps its mode") {
    scratch_dir dir;
    const std::string path = dir.path + "/out.txt";
    {
        std::ofstream(path) << "old";
    }
    REQUIRE(::chmod(path.c_str(), 0640) == 0);
    {
        attn::io::atomic_file f(path);
        f.stream() << "new";
    }
    CHECK(slurp(path) == "old");
    {
        attn::io::atomic_file f(path);
        f.stream() << "new";
        f.commit();
    }
    CHECK(slurp(path) == "new");
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0640);
    CHECK(dir.entries().size() == 1);
}

TEST_CASE("atomic_file: a hard link to the replaced file keeps the old content, as with rename") {
    // An existing regular file is swapped out by renameat2(RENAME_EXCHANGE) and unlinked.
    scratch_dir dir;
    const std::string path = dir.path + "/out.csv", other = dir.path + "/keep.csv";
    {
        std::ofstream(path) << "old";
    }
    REQUIRE(::link(path.c_str(), other.c_str()) == 0);
    {
        attn::io::atomic_file f(path);
        f.stream() << "new";
        f.commit();
    }
    CHECK(slurp(path) == "new");
    CHECK(slurp(other) == "old");
    struct stat a {}, b {};
    REQUIRE(::stat(path.c_str(), &a) == 0);
    REQUIRE(::stat(other.c_str(), &b) == 0);
    CHECK(a.st_ino != b.st_ino);
    CHECK(b.st_nlink == 1);
    CHECK(dir.entries().size() == 2);  // no temporary holding the old file
}

TEST_CASE("atomic_file: a symbolic link to a file stays a link, and its target is replaced") {
    scratch_dir dir;
    const std::string path = dir.path + "/out.json", target = dir.path + "/target.json";
    {
        std::ofstream(target) << "old";
    }
    REQUIRE(::symlink("target.json", path.c_str()) == 0);
    {
        attn::io::atomic_file f(path);
        f.stream() << "new";
        f.commit();
    }
    struct stat st {};
    REQUIRE(::lstat(path.c_str(), &st) == 0);
    CHECK(S_ISLNK(st.st_mode));
    CHECK(slurp(target) == "new");
    CHECK(dir.entries().size() == 2);
}

TEST_CASE("atomic_file: a dangling symbolic link is written through, creating its target") {
    scratch_dir dir;
    const std::string path = dir.path + "/out.json";
    REQUIRE(::symlink("made.json", path.c_str()) == 0);
    {
        attn::io::atomic_file f(path);
        f.stream() << "data";
        f.commit();
    }
    struct stat st {};
    REQUIRE(::lstat(path.c_str(), &st) == 0);
    CHECK(S_ISLNK(st.st_mode));
    CHECK(slurp(dir.path + "/made.json") == "data");
    CHECK(dir.entries().size() == 2);
}

TEST_CASE("atomic_file: a FIFO is written in place and stays a FIFO, and its reader gets all the data") {
    scratch_dir dir;
    const std::string path = dir.path + "/fifo";
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
    const std::string data(1 << 20, 'x');  // more than a pipe holds: the reader must drain it
    std::string got;
    std::thread reader([&] { got = slurp(path); });
    {
        attn::io::atomic_file f(path);
        f.stream() << data;
        f.commit();
    }
    reader.join();
    CHECK(got.size() == data.size());
    CHECK(got == data);
    struct stat st {};
    REQUIRE(::lstat(path.c_str(), &st) == 0);
    CHECK(S_ISFIFO(st.st_mode));
    CHECK(dir.entries() == std::vector<std::string>{"fifo"});
}

TEST_CASE("atomic_file: a character device (a null device made here) is written in place, not replaced") {
    scratch_dir dir;
    const std::string path = dir.path + "/null";
    if (::mknod(path.c_str(), S_IFCHR | 0666, ::makedev(1, 3)) != 0) {
        ATTN_SKIP("mknod needs root (CAP_MKNOD): no null device to write to");
    }
    {
        attn::io::atomic_file f(path);
        f.stream() << "swallowed";
        f.commit();
    }
    struct stat st {};
    REQUIRE(::lstat(path.c_str(), &st) == 0);
    CHECK(S_ISCHR(st.st_mode));
    CHECK(st.st_rdev == ::makedev(1, 3));
    CHECK(dir.entries() == std::vector<std::string>{"null"});
}

TEST_CASE("atomic_file: names of 244 to 255 bytes work: the temporary's name still fits NAME_MAX") {
    for (std::size_t len : {244u, 250u, 255u}) {
        CAPTURE(len);
        scratch_dir dir;
        const std::string path = dir.path + "/" + std::string(len - 5, 'n') + ".json";
        {
            attn::io::atomic_file f(path);
            f.stream() << "ok";
            f.commit();
        }
        CHECK(slurp(path) == "ok");
        CHECK(dir.entries().size() == 1);
    }
}

TEST_CASE("atomic_file: a new file gets 0666 minus the umask, not mkstemp's 0600") {
    scratch_dir dir;
    const mode_t mask = ::umask(022);
    const std::string path = dir.path + "/new.npy";
    {
        attn::io::atomic_file f(path);
        f.commit();
    }
    ::umask(mask);
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0644);
}

TEST_CASE("atomic_file: a missing directory is an io_error naming the destination") {
    scratch_dir dir;
    const std::string path = dir.path + "/missing/out.json";
    CHECK_THROWS_WITH_AS(attn::io::atomic_file{path},
                         (path + ": cannot write file (No such file or directory)").c_str(), attn::io_error);
}

TEST_CASE("atomic_file: a directory as destination is an io_error") {
    scratch_dir dir;
    CHECK_THROWS_WITH_AS(attn::io::atomic_file{dir.path},
                         (dir.path + ": cannot write file (Is a directory)").c_str(), attn::io_error);
    CHECK(dir.entries().empty());
}

TEST_CASE("atomic_file: commit on a failed stream throws and removes the temporary") {
    scratch_dir dir;
    const std::string path = dir.path + "/out.json";
    {
        attn::io::atomic_file f(path);
        f.stream() << "data";
        f.stream().setstate(std::ios::badbit);  // as after a failed write (disk full)
        CHECK_THROWS_AS(f.commit(), attn::io_error);
    }
    CHECK(dir.entries().empty());
}

TEST_CASE("remove_pending_temporaries: deletes live temporaries, keeps committed files") {
    scratch_dir dir;
    attn::io::atomic_file done(dir.path + "/done.txt");
    done.stream() << "ok";
    done.commit();
    attn::io::atomic_file a(dir.path + "/a.txt");
    attn::io::atomic_file b(dir.path + "/b.txt");
    a.stream() << "x";
    CHECK(dir.entries().size() == (makes_unnamed_files(dir.path) ? 1u : 3u));  // unnamed: none to delete
    attn::io::remove_pending_temporaries();
    CHECK(dir.entries() == std::vector<std::string>{"done.txt"});
}

TEST_CASE("atomic_file: a read-only destination (0444) is refused as cp refuses it, and left as it was") {
    scratch_dir dir;
    const std::string path = dir.path + "/out.txt";
    {
        std::ofstream(path) << "old";
    }
    REQUIRE(::chmod(path.c_str(), 0444) == 0);
    CHECK_THROWS_WITH_AS(attn::io::atomic_file{path}, (path + ": cannot write file (Permission denied)").c_str(),
                         attn::io_error);
    CHECK(slurp(path) == "old");
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0444);
    CHECK(dir.entries() == std::vector<std::string>{"out.txt"});  // no temporary left
}
