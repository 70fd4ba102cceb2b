#include "shm/durability.h"

#include <liburing.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace shmipam::shm {

namespace {

// One ring per process, set up on first use: a plugin invocation makes one durable write.
struct Ring {
    io_uring ring{};
    int state = 0;  // 0 untried, 1 ready, -1 unavailable
};
Ring& process_ring() {
    static Ring r;
    if (r.state == 0) {
        const int rc = io_uring_queue_init(4, &r.ring, 0);
        r.state = rc == 0 ? 1 : -1;
    }
    return r;
}

Status pwrite_all(int fd, const void* buf, size_t len, off_t off) {
    auto* p = static_cast<const char*>(buf);
    while (len > 0) {
        const ssize_t n = ::pwrite(fd, p, len, off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return make_error(Code::kIo,
                              std::string("journal write failed: ") + std::strerror(errno));
        }
        p += n;
        off += n;
        len -= size_t(n);
    }
    return Ok{};
}

Status fdatasync_fd(int fd) {
    if (::fdatasync(fd) != 0) {
        return make_error(Code::kIo,
                          std::string("journal fdatasync failed: ") + std::strerror(errno));
    }
    return Ok{};
}

Status uring_write_sync(io_uring* ring, int fd, const void* buf, size_t len, off_t off) {
    io_uring_sqe* w = io_uring_get_sqe(ring);
    io_uring_sqe* s = io_uring_get_sqe(ring);
    if (w == nullptr || s == nullptr) return make_error(Code::kIo, "io_uring queue full");
    io_uring_prep_write(w, fd, buf, unsigned(len), uint64_t(off));
    w->flags |= IOSQE_IO_LINK;
    io_uring_prep_fsync(s, fd, IORING_FSYNC_DATASYNC);
    int rc = io_uring_submit_and_wait(ring, 2);
    if (rc < 0) return make_error(Code::kIo, std::string("io_uring submit: ") + std::strerror(-rc));
    Status st = Ok{};
    for (int i = 0; i < 2; ++i) {
        io_uring_cqe* cqe = nullptr;
        rc = io_uring_wait_cqe(ring, &cqe);
        if (rc < 0)
            return make_error(Code::kIo, std::string("io_uring wait: ") + std::strerror(-rc));
        const int res = cqe->res;
        io_uring_cqe_seen(ring, cqe);
        if (res < 0) {
            st = make_error(Code::kIo, std::string("journal io_uring write/sync failed: ") +
                                           std::strerror(-res));
        }
    }
    return st;
}

}  // namespace

const char* sync_mode_name(SyncMode m) {
    switch (m) {
        case SyncMode::kNone:
            return "none";
        case SyncMode::kFdatasync:
            return "fdatasync";
        case SyncMode::kIoUring:
            return "io_uring";
    }
    return "?";
}

Status write_durably(int fd, const void* buf, size_t len, off_t off, SyncMode mode,
                     SyncMode* used) {
    if (mode == SyncMode::kIoUring) {
        Ring& r = process_ring();
        if (r.state == 1) {
            if (used) *used = SyncMode::kIoUring;
            // A short write would show as a failed CQE; the linked fsync is then cancelled.
            return uring_write_sync(&r.ring, fd, buf, len, off);
        }
        mode = SyncMode::kFdatasync;  // refused by the kernel or a sandbox: fall back
    }
    if (used) *used = mode;
    if (auto st = pwrite_all(fd, buf, len, off); !st) return st;
    if (mode == SyncMode::kFdatasync) return fdatasync_fd(fd);
    return Ok{};
}

}  // namespace shmipam::shm
