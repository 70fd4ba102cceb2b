// One exclusive lock on a file: flock(2) on a lock file created once and never removed (the
// kernel drops the lock when the last descriptor of its open file closes, so a holder killed at
// any instruction never leaves it held). Held while the FileLock lives, or by whoever shares the
// open file it was handed to (a cluster helper gets its caller's as fd 3).
//
// Every wait for one is bounded: a stuck holder (a process stopped in a debugger, a stalled
// disk, an etcd that answers slowly) turns into the waiter's clear error naming the file and
// who holds such a lock, never a process that waits until its runtime kills it. The wait blocks
// in the kernel, which hands the lock on the moment its holder lets go and costs the waiter
// nothing meanwhile (on a node where hundreds of ADDs start at once, waiters that poll take the
// CPU the holder needs); a timer of the waiting thread interrupts it every kWaitTickMs to check
// the bound. Where no timer can be had, the wait polls. Threads may wait at once: SIGALRM's
// action is shared by the waiters and put back by the last.
#pragma once

#include <sys/types.h>
#include <time.h>

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"

namespace shmipam::base {

// What a lock protects, for the message of a wait that ran out: "another cluster helper of this
// node held <path> for over N ms; try again", with `hint` as the details.
struct LockHolders {
    std::string who;   // "another cluster helper of this node"
    std::string hint;  // what a long hold means, or what to do
};

class FileLock {
  public:
    // How often a blocked wait wakes to look at the clock: the bound is kept to within a tick.
    static constexpr long kWaitTickMs = 100;

    // Waits at most `wait_ms` for it: code 11 (try again later) after that; code 74 (I/O) when
    // the file cannot be opened or locked. The directory must exist.
    // `mode`: the file's, when this creates it. A file removed while this waited (an uninstall
    // removes the installers' lock file last) is opened again and waited for anew.
    static Expected<FileLock> acquire(const std::string& path, uint64_t wait_ms,
                                      const LockHolders& holders, mode_t mode = 0644);
    // Held now, or nullopt: another holder is at work (or the file cannot be opened).
    static std::optional<FileLock> try_acquire(const std::string& path, mode_t mode = 0644);
    // The lock a caller handed over on descriptor `fd` (already held).
    static FileLock adopt(int fd) { return FileLock(fd); }

    FileLock(FileLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    FileLock& operator=(FileLock&& o) noexcept;
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;
    ~FileLock();

    int fd() const { return fd_; }

  private:
    explicit FileLock(int fd) : fd_(fd) {}
    // Waits for the lock on `fd` (closed unless the lock is got) until `wait_ms` after `start`.
    static Expected<FileLock> wait_for(int fd, const std::string& path, const timespec& start,
                                       uint64_t wait_ms, const LockHolders& holders);
    int fd_ = -1;
};

}  // namespace shmipam::base
