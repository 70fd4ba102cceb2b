#include "cluster/revision_floor.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/file_lock.h"
#include "engine/state/replace_file.h"

namespace shmipam::cluster {

namespace {

// The file holds one decimal number and a newline: far below this.
constexpr size_t kMaxFileBytes = 64;

std::string lock_path(const std::string& dir) {
    return revision_floor_path(dir) + ".lock";
}

Error unreadable(const std::string& path, const std::string& why) {
    return make_error(
        Code::kInvalidConfig,
        "cannot read the store revision this node remembers in " + path + " (" + why +
            "): refusing to use the store without it (it tells a store that went "
            "back in time, rebuilt or restored from a snapshot). If the file was "
            "damaged, run `shmipamctl cluster recover` on this node (docs/cluster.md, "
            "\"The store went back in time\")");
}

// The floor's lock (base/file_lock.h), taken to read and replace the floor: a holder reads one
// small file and replaces it durably, so a hold of this long is a stalled disk.
constexpr uint64_t kFloorLockWaitMs = 10'000;

Expected<base::FileLock> lock_floor(const std::string& dir) {
    return base::FileLock::acquire(
        lock_path(dir), kFloorLockWaitMs,
        {"another cluster helper or node pass of this node",
         "raising the remembered store revision takes one small durable write: is the disk of " +
             dir + " stalled?"});
}

Status make_dir(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return make_error(Code::kIo, "cannot create " + dir + ": " + ec.message());
    return Ok{};
}

Status write_revision(const std::string& dir, int64_t revision) {
    return engine::replace_file(revision_floor_path(dir), std::to_string(revision) + "\n",
                                engine::Replace::kDurable);
}

}  // namespace

std::string revision_floor_path(const std::string& dir) {
    return dir + "/store-revision";
}

Expected<int64_t> remembered_revision(const std::string& dir) {
    const std::string path = revision_floor_path(dir);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return int64_t{0};
        return unreadable(path, std::strerror(errno));
    }
    char buf[kMaxFileBytes + 1] = {};
    const ssize_t n = ::read(fd, buf, kMaxFileBytes);
    ::close(fd);
    if (n < 0) return unreadable(path, std::strerror(errno));
    // Written whole by a rename: anything but digits and a newline is damage, never a value.
    const std::string text(buf, size_t(n));
    if (text.size() < 2 || text.back() != '\n' ||
        text.find_first_not_of("0123456789") != text.size() - 1) {
        return unreadable(path, "not a revision");
    }
    errno = 0;
    const long long v = std::strtoll(text.c_str(), nullptr, 10);
    if (errno != 0 || v < 0) return unreadable(path, "not a revision");
    return int64_t(v);
}

Status check_revision_floor(const std::string& dir, int64_t seen) {
    auto floor = remembered_revision(dir);
    if (!floor) return floor.error();
    if (seen <= 0 || seen >= *floor) return Ok{};
    return make_error(
        Code::kInvalidConfig,
        "the cluster store went back in time: etcd answers at revision " + std::to_string(seen) +
            ", but this node has already seen revision " + std::to_string(*floor) + " (" +
            revision_floor_path(dir) +
            "). etcd was rebuilt from nothing or restored from a snapshot: blocks and fixed "
            "claims this node holds may be missing from it and be given to other nodes, so "
            "claiming now could give an address twice; refusing. Run `shmipamctl cluster "
            "recover --config <network config> --apply` on every node (docs/cluster.md, \"The "
            "store went back in time\")");
}

Status raise_revision_floor(const std::string& dir, int64_t seen) {
    if (seen <= 0) return Ok{};
    if (auto st = make_dir(dir); !st) return st;
    // Read and write under the lock: two helpers of different pools that each read the old
    // value and wrote theirs could otherwise leave the lower of the two.
    auto lock = lock_floor(dir);
    if (!lock) return lock.error();
    auto floor = remembered_revision(dir);
    if (!floor) return floor.error();
    if (seen <= *floor) return Ok{};  // nothing new: no write, no fsync
    return write_revision(dir, seen);
}

Status reset_revision_floor(const std::string& dir, int64_t revision) {
    if (auto st = make_dir(dir); !st) return st;
    auto lock = lock_floor(dir);
    if (!lock) return lock.error();
    return write_revision(dir, revision);
}

}  // namespace shmipam::cluster
