// The file-system seam: every call shmipam makes that creates, changes, removes or syncs a state
// file goes through one FileSystem (LevelDB's Env). The real one is POSIX plus liburing; tests
// install one that records every change for a power-cut simulator
// (tests/support/tracing_file_system.h) or one that fails chosen calls and forgets what was not
// synced (tests/support/faulty_file_system.h). Reading directories, stat and mmap are not
// behind it: they change nothing a power cut could take back.
//
// Calls return as POSIX does: -1 with errno set on failure.
#pragma once

#include <sys/types.h>

#include <cerrno>
#include <cstddef>
#include <string>

#include "base/status.h"

namespace shmipam::shm {

class FileSystem {
  public:
    virtual ~FileSystem() = default;

    virtual int open(const std::string& path, int flags, mode_t mode = 0) = 0;
    virtual int close(int fd) = 0;
    virtual ssize_t pwrite(int fd, const void* buf, size_t len, off_t off) = 0;
    virtual ssize_t pread(int fd, void* buf, size_t len, off_t off) = 0;
    // Allocates [0, len) for real (posix_fallocate): later stores cannot fail for space.
    virtual int allocate(int fd, off_t len) = 0;
    virtual int fdatasync(int fd) = 0;
    virtual int fsync(int fd) = 0;
    // fsync of a directory: makes the names created in it and removed from it durable.
    virtual int sync_dir(const std::string& dir) = 0;
    virtual int link(const std::string& from, const std::string& to) = 0;
    virtual int rename(const std::string& from, const std::string& to) = 0;
    virtual int unlink(const std::string& path) = 0;
    virtual int mkdir(const std::string& path, mode_t mode) = 0;

    // The io_uring commit: one submission of a write of len bytes at off linked to an
    // fdatasync of the file. 0 when both completed; -1 with errno otherwise. ENOSYS when io_uring
    // is refused here (kernel, seccomp profile, kernel.io_uring_disabled): the caller falls back
    // to pwrite + fdatasync.
    virtual int write_and_sync_uring(int fd, const void* buf, size_t len, off_t off) = 0;
};

// kIo: "<what> <path>: <strerror(err)>", the form of every file error shmipam answers.
Error io_error(const std::string& what, const std::string& path, int err = errno);

// POSIX and liburing, nothing else.
FileSystem& real_file_system();

// The file system every shm/ and engine/ call uses: the real one unless a test installed another.
// One per process, installed before any network is opened (a plugin invocation has one file
// system; threading it through every constructor would buy nothing).
FileSystem& file_system();
// nullptr: back to the real one. Not thread-safe against calls in flight.
void install_file_system(FileSystem* fs);

}  // namespace shmipam::shm
