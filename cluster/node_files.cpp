#include "cluster/node_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "base/directory.h"
#include "base/write_all.h"
#include "cluster/block_cache.h"

namespace shmipam::cluster {

namespace {

bool fresh_mtime(const struct stat& st) {
    return st.st_mtim.tv_sec <= std::time(nullptr) + kClockSlackS;
}

}  // namespace

std::set<std::string> cached_pools(const std::string& state_dir) {
    constexpr std::string_view kSuffix = ".blocks";
    std::set<std::string> out;
    (void)base::for_each_entry(state_dir, [&](std::string_view name) {
        if (name.size() > kSuffix.size() && name.ends_with(kSuffix)) {
            out.emplace(name.substr(0, name.size() - kSuffix.size()));
        }
    });
    return out;
}

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
    auto held =
        base::FileLock::acquire(path, wait_ms,
                                {"another cluster helper of this node",
                                 "the holder is stuck or etcd is slow (ipam.etcd.budgetMs)"});
    if (!held) return held.error();
    return PoolLock(std::move(*held));
}

std::optional<PoolLock> PoolLock::try_acquire(const std::string& path) {
    make_dirs(path.substr(0, path.rfind('/')));
    auto held = base::FileLock::try_acquire(path);
    if (!held) return std::nullopt;
    return PoolLock(std::move(*held));
}

}  // namespace shmipam::cluster
