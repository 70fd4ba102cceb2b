// Waiting for a state a test can observe, instead of sleeping for the time a fast machine needs
// to reach it (docs/testing.md, "Tests that do not depend on the machine's speed"): a machine
// slower at exec, with CPU hogs beside the test, reaches the same state later, and a fixed sleep
// there either fails the test or lets it pass without having reached what it meant to check.
#pragma once

#include <sys/inotify.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <thread>

namespace shmipam::testing {

// How long a wait for a state may last before the test fails. It only bounds a hang: a state
// reached in milliseconds here takes seconds on a loaded machine, never a minute.
inline constexpr std::chrono::seconds kStateDeadline{60};
// How often a wait looks again: often enough to add little to a test, rarely enough to leave
// the CPU to the processes it waits for.
inline constexpr std::chrono::milliseconds kStatePoll{20};

// Looks at `reached` until it holds (true) or `deadline` has passed (false, after a last look).
inline bool wait_until(const std::function<bool()>& reached,
                       std::chrono::steady_clock::duration deadline = kStateDeadline) {
    const auto until = std::chrono::steady_clock::now() + deadline;
    while (!reached()) {
        if (std::chrono::steady_clock::now() >= until) return reached();
        std::this_thread::sleep_for(kStatePoll);
    }
    return true;
}

// The opens of one file, by any process, from the moment this is made (inotify IN_OPEN): how a
// test sees that another process reached a step that opens it (a lock file it is about to wait
// for, a file it reads at every round).
class OpenWatch {
  public:
    explicit OpenWatch(const std::string& path) : fd_(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK)) {
        if (fd_ >= 0 && ::inotify_add_watch(fd_, path.c_str(), IN_OPEN) < 0) {
            ::close(fd_);
            fd_ = -1;
        }
    }
    ~OpenWatch() {
        if (fd_ >= 0) ::close(fd_);
    }
    OpenWatch(const OpenWatch&) = delete;
    OpenWatch& operator=(const OpenWatch&) = delete;

    bool watching() const { return fd_ >= 0; }
    // Opens seen so far.
    size_t opens() {
        drain();
        return opens_;
    }
    // Until `n` opens were seen, or `stop()` holds (true either way), or `deadline` passed.
    bool wait_opens(size_t n, const std::function<bool()>& stop = nullptr,
                    std::chrono::steady_clock::duration deadline = kStateDeadline) {
        return wait_until([&] { return opens() >= n || (stop && stop()); }, deadline);
    }

  private:
    void drain() {
        if (fd_ < 0) return;
        alignas(inotify_event) char buf[4096];
        for (ssize_t n; (n = ::read(fd_, buf, sizeof buf)) > 0;) {
            for (ssize_t at = 0; at < n;) {
                const auto* e = reinterpret_cast<const inotify_event*>(buf + at);
                opens_ += (e->mask & IN_OPEN) != 0 ? 1 : 0;
                at += ssize_t(sizeof(inotify_event) + e->len);
            }
        }
    }

    int fd_ = -1;
    size_t opens_ = 0;
};

}  // namespace shmipam::testing
