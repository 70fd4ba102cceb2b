#include "cluster/node_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "base/write_all.h"
#include "cluster/block_cache.h"

namespace shmipam::cluster {

namespace {

// The poll of a lock wait backs off to this: a waiter notices a freed lock within it, and twenty
// waiters polling cost nothing measurable.
constexpr uint64_t kLockPollMaxMs = 8;

bool fresh_mtime(const struct stat& st) {
    return st.st_mtim.tv_sec <= std::time(nullptr) + kClockSlackS;
}

}  // namespace

std::string NodeFiles::block_cache(const std::string& pool) const {
    return block_cache_path(state_dir, pool);
}

void make_dirs(const std::string& dir) {
    for (size_t at = dir.find('/', 1);; at = dir.find('/', at + 1)) {
        ::mkdir(dir.substr(0, at).c_str(), 0755);
        if (at == std::string::npos) return;
    }
}

void touch(const std::string& path, const std::string& text) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        if (!text.empty()) (void)write_all(fd, text);
        ::close(fd);
    }
    ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // an existing file's time too
}

bool touched_within(const std::string& path, time_t seconds) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return false;
    return st.st_mtime + seconds > std::time(nullptr) && fresh_mtime(st);
}

bool touched_since(const std::string& path, const timespec& since) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return false;
    const bool after = st.st_mtim.tv_sec > since.tv_sec ||
                       (st.st_mtim.tv_sec == since.tv_sec && st.st_mtim.tv_nsec >= since.tv_nsec);
    return after && fresh_mtime(st);
}

namespace {

std::string first_line(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    char buf[512];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    ::close(fd);
    if (n <= 0) return {};
    const std::string text(buf, size_t(n));
    return text.substr(0, text.find('\n'));
}

}  // namespace

std::optional<Error> unavailable_since(const NodeFiles& files, const std::string& pool,
                                       const timespec& since) {
    const std::string marker = files.unavailable(pool);
    if (!touched_since(marker, since)) return std::nullopt;
    std::string why = first_line(marker);
    if (why.empty()) why = "etcd unavailable";
    return make_error(Code::kUnavailable,
                      why +
                          " (found by another cluster helper of this node while this "
                          "invocation waited for the pool lock)");
}

Expected<PoolLock> PoolLock::acquire(const std::string& path, uint64_t wait_ms) {
    make_dirs(path.substr(0, path.rfind('/')));
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        return make_error(Code::kIo, "cannot open " + path + ": " + std::strerror(errno));
    }
    timespec start{};
    ::clock_gettime(CLOCK_MONOTONIC, &start);
    for (uint64_t pause_ms = 1;; pause_ms = std::min(pause_ms * 2, kLockPollMaxMs)) {
        if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return PoolLock(fd);
        if (errno != EWOULDBLOCK && errno != EINTR) {
            const int e = errno;
            ::close(fd);
            return make_error(Code::kIo, "cannot lock " + path + ": " + std::strerror(e));
        }
        timespec now{};
        ::clock_gettime(CLOCK_MONOTONIC, &now);
        const int64_t waited_ns =
            int64_t(now.tv_sec - start.tv_sec) * 1'000'000'000 + (now.tv_nsec - start.tv_nsec);
        const uint64_t waited_ms = uint64_t(waited_ns / 1'000'000);
        if (waited_ms >= wait_ms) {
            ::close(fd);
            return make_error(Code::kTryAgainLater,
                              "another cluster helper of this node held " + path + " for over " +
                                  std::to_string(wait_ms) + " ms; try again",
                              "the holder is stuck or etcd is slow (ipam.etcd.budgetMs)");
        }
        const timespec pause{0, long(std::min(pause_ms, wait_ms - waited_ms)) * 1000000};
        ::nanosleep(&pause, nullptr);
    }
}

std::optional<PoolLock> PoolLock::try_acquire(const std::string& path) {
    make_dirs(path.substr(0, path.rfind('/')));
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return std::nullopt;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        ::close(fd);
        return std::nullopt;
    }
    return PoolLock(fd);
}

PoolLock& PoolLock::operator=(PoolLock&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = o.fd_;
        o.fd_ = -1;
    }
    return *this;
}

PoolLock::~PoolLock() {
    if (fd_ >= 0) ::close(fd_);
}

}  // namespace shmipam::cluster
