// An exclusive lock on a state directory, held while a process decides that a file in it is
// stale and removes it, so that the check and the unlink are one step for every other remover:
// a late remover can then never unlink, by name, a file that replaced the one it judged.
// flock(2) on "<dir>/lock" (created once, never removed): the kernel drops the lock when its
// holder dies, so a remover SIGKILLed inside never leaves it held. Waiting is bounded by time.
#pragma once

#include <chrono>
#include <string>

#include "base/status.h"

namespace shmipam::shm {

class DirLock {
  public:
    static constexpr const char* kFileName = "lock";
    // kTryAgainLater when another holder kept it past `wait`; kIo when the lock file cannot be
    // opened.
    static Expected<DirLock> acquire(const std::string& dir, std::chrono::milliseconds wait);

    DirLock(DirLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
    DirLock& operator=(DirLock&&) = delete;
    DirLock(const DirLock&) = delete;
    ~DirLock();

  private:
    explicit DirLock(int fd) : fd_(fd) {}
    int fd_ = -1;
};

}  // namespace shmipam::shm
