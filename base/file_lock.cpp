#include "base/file_lock.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

namespace shmipam::base {

namespace {

// Where no such timer can be had, the wait polls, backing off to this: a waiter notices a freed
// lock within it.
constexpr uint64_t kLockPollMaxMs = 8;

void interrupt_only(int) {}

// The process's SIGALRM action while any thread waits: interrupt_only, installed by the first
// waiter and the old action put back by the last (a waiter that restored it while another's
// timer still ticked would let the next tick kill the process).
class AlarmAction {
  public:
    static bool enter() {
        std::lock_guard<std::mutex> hold(mutex());
        if (waiters() == 0) {
            struct sigaction interrupt {};
            interrupt.sa_handler = interrupt_only;
            sigemptyset(&interrupt.sa_mask);
            if (::sigaction(SIGALRM, &interrupt, &saved()) != 0) return false;
        }
        ++waiters();
        return true;
    }
    static void leave() {
        std::lock_guard<std::mutex> hold(mutex());
        if (--waiters() == 0) ::sigaction(SIGALRM, &saved(), nullptr);
    }

  private:
    static std::mutex& mutex() {
        static std::mutex m;
        return m;
    }
    static int& waiters() {
        static int n = 0;
        return n;
    }
    static struct sigaction& saved() {
        static struct sigaction old {};
        return old;
    }
};

// While it lives, SIGALRM every kWaitTickMs to this thread alone (never another thread of the
// process), handled by interrupt_only without SA_RESTART: a blocking flock returns EINTR.
class WaitTicks {
  public:
    WaitTicks() {
        if (!AlarmAction::enter()) return;
        sigset_t alarm_only;
        sigemptyset(&alarm_only);
        sigaddset(&alarm_only, SIGALRM);
        ::pthread_sigmask(SIG_UNBLOCK, &alarm_only, &old_mask_);
        sigevent to_this_thread{};
        to_this_thread.sigev_notify = SIGEV_THREAD_ID;
        to_this_thread.sigev_signo = SIGALRM;
        to_this_thread._sigev_un._tid = ::gettid();
        if (::timer_create(CLOCK_MONOTONIC, &to_this_thread, &timer_) != 0) {
            restore();
            return;
        }
        const timespec tick{0, FileLock::kWaitTickMs * 1'000'000};
        const itimerspec every_tick{tick, tick};
        if (::timer_settime(timer_, 0, &every_tick, nullptr) != 0) {
            ::timer_delete(timer_);
            restore();
            return;
        }
        armed_ = true;
    }
    ~WaitTicks() {
        if (!armed_) return;
        // A tick sent before the delete was delivered on the way back from it (the signal is
        // unblocked here), to interrupt_only: none is left for the old action.
        ::timer_delete(timer_);
        restore();
    }
    WaitTicks(const WaitTicks&) = delete;
    WaitTicks& operator=(const WaitTicks&) = delete;

    bool armed() const { return armed_; }

  private:
    void restore() {
        ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
        AlarmAction::leave();
    }

    sigset_t old_mask_{};
    timer_t timer_{};
    bool armed_ = false;
};

// Whether the locked file `fd` is still the one at `path`: an uninstall removes the lock file
// last, holding it, and a waiter that then gets the lock of the removed file must not work
// beside one that opened the path anew.
bool still_at_path(int fd, const std::string& path) {
    struct stat held {
    }, named{};
    return ::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 &&
           held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

uint64_t ms_since(const timespec& start) {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    return uint64_t(
        (int64_t(now.tv_sec - start.tv_sec) * 1'000'000'000 + (now.tv_nsec - start.tv_nsec)) /
        1'000'000);
}

}  // namespace

Expected<FileLock> FileLock::acquire(const std::string& path, uint64_t wait_ms,
                                     const LockHolders& holders, mode_t mode) {
    timespec start{};
    ::clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0) {
            return make_error(Code::kIo, "cannot open " + path + ": " + std::strerror(errno));
        }
        auto held = wait_for(fd, path, start, wait_ms, holders);
        if (!held) return held.error();
        if (still_at_path(held->fd(), path)) return held;
        // The file was removed (or replaced) while this waited: the lock of the one at the path
        // now, within the same bound.
        if (ms_since(start) >= wait_ms) {
            return make_error(Code::kTryAgainLater,
                              path + " kept being removed or replaced while waited for; try again",
                              holders.hint);
        }
    }
}

Expected<FileLock> FileLock::wait_for(int fd, const std::string& path, const timespec& start,
                                      uint64_t wait_ms, const LockHolders& holders) {
    // Blocked in the kernel while the timer ticks; polled where no timer can be had.
    const WaitTicks ticks;
    for (uint64_t pause_ms = 1;; pause_ms = std::min(pause_ms * 2, kLockPollMaxMs)) {
        if (::flock(fd, ticks.armed() ? LOCK_EX : LOCK_EX | LOCK_NB) == 0) return FileLock(fd);
        if (errno != EWOULDBLOCK && errno != EINTR) {
            const int e = errno;
            ::close(fd);
            return make_error(Code::kIo, "cannot lock " + path + ": " + std::strerror(e));
        }
        const uint64_t waited = ms_since(start);
        if (waited >= wait_ms) {
            ::close(fd);
            return make_error(Code::kTryAgainLater,
                              holders.who + " held " + path + " for over " +
                                  std::to_string(wait_ms) + " ms; try again",
                              holders.hint);
        }
        if (ticks.armed()) continue;  // a tick: the clock looked at, blocked again
        const timespec pause{0, long(std::min(pause_ms, wait_ms - waited)) * 1000000};
        ::nanosleep(&pause, nullptr);
    }
}

std::optional<FileLock> FileLock::try_acquire(const std::string& path, mode_t mode) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0) return std::nullopt;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0 || !still_at_path(fd, path)) {
        ::close(fd);
        return std::nullopt;
    }
    return FileLock(fd);
}

FileLock& FileLock::operator=(FileLock&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = o.fd_;
        o.fd_ = -1;
    }
    return *this;
}

FileLock::~FileLock() {
    if (fd_ >= 0) ::close(fd_);
}

}  // namespace shmipam::base
