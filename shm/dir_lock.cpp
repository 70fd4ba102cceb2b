#include "shm/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "shm/file_system.h"

namespace shmipam::shm {

namespace {

// A remover holds the lock for one check and one unlink (microseconds), so a waiter looks this
// often and gets it almost at once; while a creator's longer rebuild holds it, a failed flock per
// look costs little.
constexpr useconds_t kPollUs = 200;

}  // namespace

Expected<DirLock> DirLock::acquire(const std::string& dir, std::chrono::milliseconds wait) {
    const std::string path = dir + "/" + kFileName;
    FileSystem& fs = file_system();
    const int fd = fs.open(path, O_RDWR | O_CREAT, 0644);
    if (fd < 0) {
        return io_error("cannot open", path);
    }
    const uint64_t deadline = base::boot_ns() + uint64_t(wait.count()) * 1'000'000;
    while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if ((errno != EWOULDBLOCK && errno != EINTR) || base::boot_ns() >= deadline) {
            const int err = errno;
            fs.close(fd);
            return make_error(Code::kTryAgainLater,
                              "the state directory is locked by another invocation",
                              path + ": " + std::strerror(err));
        }
        ::usleep(kPollUs);
    }
    return DirLock(fd);
}

DirLock::~DirLock() {
    if (fd_ >= 0) file_system().close(fd_);  // closing the descriptor drops the lock
}

}  // namespace shmipam::shm
