#include "shm/file_system.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace shmipam::shm {
namespace {

class PosixFileSystem final : public FileSystem {
  public:
    int open(const std::string& path, int flags, mode_t mode) override {
        return ::open(path.c_str(), flags | O_CLOEXEC, mode);
    }
    int close(int fd) override { return ::close(fd); }
    ssize_t pwrite(int fd, const void* buf, size_t len, off_t off) override {
        return ::pwrite(fd, buf, len, off);
    }
    ssize_t pread(int fd, void* buf, size_t len, off_t off) override {
        return ::pread(fd, buf, len, off);
    }
    int allocate(int fd, off_t len) override {
        if (const int err = ::posix_fallocate(fd, 0, len); err != 0) {
            errno = err;
            return -1;
        }
        return 0;
    }
    int fdatasync(int fd) override { return ::fdatasync(fd); }
    int fsync(int fd) override { return ::fsync(fd); }
    int sync_dir(const std::string& dir) override {
        const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) return -1;
        const int rc = ::fsync(fd);
        const int err = errno;
        ::close(fd);
        errno = err;
        return rc;
    }
    int link(const std::string& from, const std::string& to) override {
        return ::link(from.c_str(), to.c_str());
    }
    int rename(const std::string& from, const std::string& to) override {
        return ::rename(from.c_str(), to.c_str());
    }
    int unlink(const std::string& path) override { return ::unlink(path.c_str()); }
    int mkdir(const std::string& path, mode_t mode) override { return ::mkdir(path.c_str(), mode); }

    int write_and_sync_uring(int fd, const void* buf, size_t len, off_t off) override {
        io_uring* ring = process_ring();
        if (ring == nullptr) {
            errno = ENOSYS;
            return -1;
        }
        io_uring_sqe* w = io_uring_get_sqe(ring);
        io_uring_sqe* s = io_uring_get_sqe(ring);
        if (w == nullptr || s == nullptr) {
            errno = EBUSY;
            return -1;
        }
        io_uring_prep_write(w, fd, buf, unsigned(len), uint64_t(off));
        // Linked: the sync runs only after the whole write. A short write completes with a
        // short *positive* count (not an error) and the sync with -ECANCELED; the write's CQE
        // is told apart by its user_data and reported as the short write it is.
        w->flags |= IOSQE_IO_LINK;
        io_uring_sqe_set_data64(w, 1);
        io_uring_prep_fsync(s, fd, IORING_FSYNC_DATASYNC);
        io_uring_sqe_set_data64(s, 2);
        if (const int rc = io_uring_submit_and_wait(ring, 2); rc < 0) {
            errno = -rc;
            return -1;
        }
        int first_error = 0;
        for (int i = 0; i < 2; ++i) {
            io_uring_cqe* cqe = nullptr;
            if (const int rc = io_uring_wait_cqe(ring, &cqe); rc < 0) {
                errno = -rc;
                return -1;
            }
            const bool is_write = io_uring_cqe_get_data64(cqe) == 1;
            int err = cqe->res < 0 ? -cqe->res : 0;
            if (is_write && cqe->res >= 0 && size_t(cqe->res) < len) err = EIO;  // short write
            // The write's own error first: the sync's ECANCELED only says the write failed.
            if (err != 0 && (first_error == 0 || (is_write && first_error == ECANCELED))) {
                first_error = err;
            }
            io_uring_cqe_seen(ring, cqe);
        }
        if (first_error != 0) {
            errno = first_error;
            return -1;
        }
        return 0;
    }

  private:
    // One ring per process, set up on first use (a plugin invocation makes one durable write);
    // nullptr when the kernel or a sandbox refuses io_uring.
    io_uring* process_ring() {
        if (ring_state_ == 0) ring_state_ = io_uring_queue_init(4, &ring_, 0) == 0 ? 1 : -1;
        return ring_state_ == 1 ? &ring_ : nullptr;
    }
    io_uring ring_{};
    int ring_state_ = 0;  // 0 untried, 1 ready, -1 refused
};

FileSystem* installed = nullptr;

}  // namespace

Error io_error(const std::string& what, const std::string& path, int err) {
    return make_error(Code::kIo, what + " " + path + ": " + std::strerror(err));
}

FileSystem& real_file_system() {
    static PosixFileSystem fs;
    return fs;
}

FileSystem& file_system() {
    return installed != nullptr ? *installed : real_file_system();
}

void install_file_system(FileSystem* fs) {
    installed = fs;
}

}  // namespace shmipam::shm
