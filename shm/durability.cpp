#include "shm/durability.h"

#include <cerrno>
#include <cstring>

#include "shm/file_system.h"

namespace shmipam::shm {

namespace {

Error failed(const char* what) {
    return make_error(Code::kIo,
                      std::string("journal ") + what + " failed: " + std::strerror(errno));
}

Status pwrite_all(FileSystem& fs, int fd, const void* buf, size_t len, off_t off) {
    auto* p = static_cast<const char*>(buf);
    while (len > 0) {
        const ssize_t n = fs.pwrite(fd, p, len, off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return failed("write");
        }
        p += n;
        off += n;
        len -= size_t(n);
    }
    return Ok{};
}

}  // namespace

Status write_durably(int fd, const void* buf, size_t len, off_t off, SyncMode mode,
                     SyncMode* used) {
    FileSystem& fs = file_system();
    if (mode == SyncMode::kIoUring) {
        if (fs.write_and_sync_uring(fd, buf, len, off) == 0) {
            if (used) *used = SyncMode::kIoUring;
            return Ok{};
        }
        if (errno != ENOSYS) {
            if (used) *used = SyncMode::kIoUring;
            return failed("io_uring write/sync");
        }
        mode = SyncMode::kFdatasync;  // refused by the kernel or a sandbox: fall back
    }
    if (used) *used = mode;
    if (auto st = pwrite_all(fs, fd, buf, len, off); !st) return st;
    if (mode == SyncMode::kFdatasync && fs.fdatasync(fd) != 0) return failed("fdatasync");
    return Ok{};
}

}  // namespace shmipam::shm
