#include "cluster/node_files.h"

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
#include <ctime>

#include "base/directory.h"
#include "base/write_all.h"
#include "cluster/block_cache.h"

namespace shmipam::cluster {

namespace {

// A lock wait blocks in the kernel, which hands the lock on the moment its holder lets go, and
// costs the waiter nothing meanwhile: on a node where hundreds of ADDs start at once, waiters
// that poll take the CPU the holder needs to finish. A timer of this thread's interrupts the
// wait this often (SIGALRM, to a handler that does nothing) so that the bound is kept to within
// a tick; a tick is one wake-up of the waiter.
constexpr long kLockWaitTickMs = 100;
// Where no such timer can be had, the wait polls, backing off to this: a waiter notices a freed
// lock within it.
constexpr uint64_t kLockPollMaxMs = 8;

void interrupt_only(int) {}

// While it lives, SIGALRM every kLockWaitTickMs to this thread alone (never another thread of the
// process), handled by interrupt_only without SA_RESTART: a blocking flock returns EINTR.
class WaitTicks {
  public:
    WaitTicks() {
        struct sigaction interrupt {};
        interrupt.sa_handler = interrupt_only;
        sigemptyset(&interrupt.sa_mask);
        if (::sigaction(SIGALRM, &interrupt, &old_action_) != 0) return;
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
        const timespec tick{0, kLockWaitTickMs * 1'000'000};
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
        ::sigaction(SIGALRM, &old_action_, nullptr);
    }

    struct sigaction old_action_ {};
    sigset_t old_mask_{};
    timer_t timer_{};
    bool armed_ = false;
};

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
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        return make_error(Code::kIo, "cannot open " + path + ": " + std::strerror(errno));
    }
    timespec start{};
    ::clock_gettime(CLOCK_MONOTONIC, &start);
    auto waited_ms = [&] {
        timespec now{};
        ::clock_gettime(CLOCK_MONOTONIC, &now);
        return uint64_t(
            (int64_t(now.tv_sec - start.tv_sec) * 1'000'000'000 + (now.tv_nsec - start.tv_nsec)) /
            1'000'000);
    };
    // Blocked in the kernel while the timer ticks; polled where no timer can be had.
    const WaitTicks ticks;
    for (uint64_t pause_ms = 1;; pause_ms = std::min(pause_ms * 2, kLockPollMaxMs)) {
        if (::flock(fd, ticks.armed() ? LOCK_EX : LOCK_EX | LOCK_NB) == 0) return PoolLock(fd);
        if (errno != EWOULDBLOCK && errno != EINTR) {
            const int e = errno;
            ::close(fd);
            return make_error(Code::kIo, "cannot lock " + path + ": " + std::strerror(e));
        }
        const uint64_t waited = waited_ms();
        if (waited >= wait_ms) {
            ::close(fd);
            return make_error(Code::kTryAgainLater,
                              "another cluster helper of this node held " + path + " for over " +
                                  std::to_string(wait_ms) + " ms; try again",
                              "the holder is stuck or etcd is slow (ipam.etcd.budgetMs)");
        }
        if (ticks.armed()) continue;  // a tick: the clock looked at, blocked again
        const timespec pause{0, long(std::min(pause_ms, wait_ms - waited)) * 1000000};
        ::nanosleep(&pause, nullptr);
    }
}

std::optional<PoolLock> PoolLock::try_acquire(const std::string& path) {
    make_dirs(path.substr(0, path.rfind('/')));
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return std::nullopt;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        ::close(fd);
        return std::nullopt;
    }
    return PoolLock(fd);
}

PoolLock& PoolLock::operator=(PoolLock&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = o.fd_;
        o.fd_ = -1;
    }
    return *this;
}

PoolLock::~PoolLock() {
    if (fd_ >= 0) ::close(fd_);
}

}  // namespace shmipam::cluster
