#include "shm/mapped_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/clock.h"
#include "base/directory.h"
#include "base/fault_point.h"
#include "base/unique_id.h"
#include "shm/file_system.h"

namespace shmipam::shm {
namespace bip = boost::interprocess;

namespace {

std::string temp_prefix(const std::string& name) {
    return "." + name + ".tmp.";
}

std::string temp_name(const std::string& name) {
    return temp_prefix(name) + std::to_string(::getpid()) + "." +
           std::to_string(base::unique_id() >> 32);
}

// A creator locks its temp file right after creating it and allocates the file's pages only
// then, keeping the lock until the file is published. So an unlocked file with pages is a dead
// creator's, removed at once; an unlocked empty one may be a live creator's that has not been
// scheduled again to take its lock (on a loaded node, hundreds of invocations starting at once,
// that takes far longer than the microseconds between the two calls): it is left alone for this
// long. Only a creator killed in those microseconds leaves one to wait for (a waiter's bound,
// kCreatorWaitNs, once).
constexpr uint64_t kUnlockedTempGraceNs = 30'000'000'000;
// How long a first caller waits for another creator's file before building its own.
constexpr uint64_t kCreatorWaitNs = 2'000'000'000;
// How often it looks meanwhile: a creator's work takes milliseconds, and one look (a listing and
// a flock probe per temp file) is cheap beside it.
constexpr useconds_t kCreatorPollUs = 1000;

// Looks at the files creators left aside (".<name>.tmp.<pid>.<n>"): removes those whose creator
// is gone and says whether a live creator is at work. Liveness is the creator's flock on its
// file, which the kernel drops when it dies, in any pid namespace; a pid would be reused, or
// name a process of another namespace, and make a dead creator look alive for good.
bool sweep_creators_files(const std::string& dir, const std::string& name) {
    const std::string prefix = temp_prefix(name);
    bool live = false;
    base::for_each_entry(dir, [&](std::string_view n) {
        if (!n.starts_with(prefix)) return;
        const std::string path = dir + "/" + std::string(n);
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return;  // published or removed meanwhile
        struct stat sb {};
        const bool locked = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
        const bool not_yet_locked = ::fstat(fd, &sb) == 0 && sb.st_size == 0 &&
                                    base::unix_ns() < uint64_t(sb.st_mtim.tv_sec) * 1'000'000'000u +
                                                          uint64_t(sb.st_mtim.tv_nsec) +
                                                          kUnlockedTempGraceNs;
        ::close(fd);
        if (locked || not_yet_locked) {
            live = true;
        } else {
            file_system().unlink(path);
        }
    });
    return live;
}

// Many first callers of a network arrive together; building the same (possibly large) file
// once each is wasted work. While a live creator is at work, wait a little for its file
// (correctness never depends on this: link() decides, and a dead creator is not waited for).
bool wait_for_other_creator(const std::string& dir, const std::string& name,
                            const std::string& final_path) {
    const uint64_t deadline = base::boot_ns() + kCreatorWaitNs;
    while (base::boot_ns() < deadline) {
        if (file_exists(final_path)) return true;
        if (!sweep_creators_files(dir, name)) return false;
        ::usleep(kCreatorPollUs);
    }
    return file_exists(final_path);
}

}  // namespace

Expected<MappedFile> MappedFile::open(const std::string& path, Access access) {
    const auto mode = access == Access::kReadOnly ? bip::read_only : bip::read_write;
    struct stat sb {};
    if (::stat(path.c_str(), &sb) != 0) return io_error("cannot stat", path, errno);
    if (!S_ISREG(sb.st_mode)) return make_error(Code::kIo, "not a regular file: " + path);
    if (sb.st_size == 0) return make_error(Code::kArenaDamaged, "empty state file: " + path);
    MappedFile f;
    try {
        f.file_ = bip::file_mapping(path.c_str(), mode);
        // Kept open for the process's life: never inherited by a program it starts (its lease
        // locks would outlive it there).
        (void)::fcntl(f.file_.get_mapping_handle().handle, F_SETFD, FD_CLOEXEC);
        // The size of the file actually opened (the name may have moved since the stat).
        struct stat mapped {};
        if (::fstat(f.file_.get_mapping_handle().handle, &mapped) != 0) {
            return io_error("cannot stat", path, errno);
        }
        if (mapped.st_size == 0)
            return make_error(Code::kArenaDamaged, "empty state file: " + path);
        f.region_ = bip::mapped_region(f.file_, mode, 0, size_t(mapped.st_size));
    } catch (const bip::interprocess_exception& e) {
        return make_error(Code::kIo, "cannot map " + path + ": " + e.what());
    }
    f.path_ = path;
    return f;
}

int MappedFile::fd() const {
    return path_.empty() ? -1 : int(file_.get_mapping_handle().handle);
}

bool MappedFile::still_at_path() const {
    struct stat sb {};
    return ::fstat(file_.get_mapping_handle().handle, &sb) == 0 && sb.st_nlink > 0;
}

Expected<Publish> create_published(const std::string& dir, const std::string& name, size_t bytes,
                                   const std::function<Status(std::span<std::byte>)>& init) {
    const std::string final_path = dir + "/" + name;
    if (file_exists(final_path)) return Publish::kAlreadyExisted;
    if (wait_for_other_creator(dir, name, final_path)) return Publish::kAlreadyExisted;
    const std::string tmp_path = dir + "/" + temp_name(name);
    FileSystem& fs = file_system();
    int fd = fs.open(tmp_path, O_RDWR | O_CREAT | O_EXCL, 0644);
    if (fd < 0) return io_error("cannot create", tmp_path, errno);
    // Says "at work" to the sweeps of other creators, before the file has pages. Waited for: a
    // sweep's probe holds a shared lock on the file for a moment, and a creator that went on
    // without its lock would have its file removed as a dead creator's.
    while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
    }
    auto fail = [&](Error e) -> Expected<Publish> {
        fs.close(fd);
        fs.unlink(tmp_path);
        return e;
    };
    // Never sparse: every page is allocated now, so later stores cannot fault on a full disk.
    if (fs.allocate(fd, off_t(bytes)) != 0) {
        return fail(
            io_error("cannot allocate " + std::to_string(bytes) + " bytes for", tmp_path, errno));
    }
    SHMIPAM_FAULT("create.after_allocate");
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return fail(io_error("cannot map", tmp_path, errno));
    Status st = init(std::span<std::byte>(static_cast<std::byte*>(p), bytes));
    ::munmap(p, bytes);
    if (!st) return fail(st.error());
    SHMIPAM_FAULT("create.before_publish");
    if (fs.link(tmp_path, final_path) != 0) {
        const int err = errno;
        if (err == EEXIST) {
            fs.close(fd);
            fs.unlink(tmp_path);
            return Publish::kAlreadyExisted;
        }
        if (err == ENOENT && !file_exists(tmp_path)) {
            // Swept by another creator that judged it abandoned (we were descheduled for
            // longer than kUnlockedTempGraceNs between creating it and locking it): try again.
            fs.close(fd);
            return make_error(Code::kTryAgainLater,
                              "a file being created was removed by another "
                              "invocation that judged it abandoned",
                              tmp_path);
        }
        return fail(io_error("cannot publish", final_path, err));
    }
    fs.close(fd);
    fs.unlink(tmp_path);
    return Publish::kCreated;
}

Status make_dirs(const std::string& path) {
    if (path.empty()) return make_error(Code::kInvalidConfig, "empty directory path");
    // Every invocation after the first finds the directory there: one stat, no mkdir per
    // path component.
    struct stat existing {};
    if (::stat(path.c_str(), &existing) == 0 && S_ISDIR(existing.st_mode)) return Ok{};
    std::string cur;
    size_t pos = 0;
    while (pos != std::string::npos) {
        pos = path.find('/', pos + 1);
        cur = path.substr(0, pos);
        if (cur.empty()) continue;
        if (file_system().mkdir(cur, 0755) != 0 && errno != EEXIST) {
            return io_error("cannot create directory", cur, errno);
        }
    }
    struct stat sb {};
    if (::stat(path.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        return make_error(Code::kIo, "not a directory: " + path);
    }
    return Ok{};
}

bool file_exists(const std::string& path) {
    struct stat sb {};
    return ::stat(path.c_str(), &sb) == 0;
}

}  // namespace shmipam::shm
