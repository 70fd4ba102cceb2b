#include "tests/support/test_ports.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

namespace shmipam::testing {

namespace {

constexpr const char* kEphemeralRangeFile = "/proc/sys/net/ipv4/ip_local_port_range";

// Whether a server could bind `port` on loopback now: nothing listens on it. SO_REUSEADDR as the
// servers set it (etcd, Prometheus, Python's http.server), so that connections of an earlier
// server in TIME_WAIT do not count as a listener.
bool bindable(uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
}

std::string read_fd(int fd) {
    std::string text(32, '\0');
    const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
    text.resize(n > 0 ? size_t(n) : 0);
    return text;
}

}  // namespace

PortWindow port_window(uint16_t ephemeral_first, uint16_t ephemeral_last) {
    const uint32_t below =
        ephemeral_first > kLowestTestPort ? ephemeral_first - kLowestTestPort : 0;
    const uint32_t above = ephemeral_last < 65535 ? 65535 - ephemeral_last : 0;
    if (below >= above && below >= kFewestTestPorts) {
        return {kLowestTestPort, uint16_t(ephemeral_first - 1)};
    }
    if (above >= kFewestTestPorts) {
        const uint16_t first = std::max<uint32_t>(ephemeral_last + 1, kLowestTestPort);
        if (65535u - first + 1 >= kFewestTestPorts) return {first, 65535};
    }
    return {};
}

uint16_t reserve_port(std::string* why) {
    return reserve_port_by(kPortCursorFile, why);
}

uint16_t reserve_port_by(const std::string& cursor_file, std::string* why) {
    auto fail = [&](const std::string& text) -> uint16_t {
        if (why) *why = text;
        return 0;
    };
    unsigned lo = 0, hi = 0;
    std::ifstream(kEphemeralRangeFile) >> lo >> hi;
    if (lo == 0 || hi < lo || hi > 65535) {
        return fail(std::string("cannot read the ephemeral port range from ") +
                    kEphemeralRangeFile);
    }
    const PortWindow window = port_window(uint16_t(lo), uint16_t(hi));
    if (window.first == 0) {
        return fail("the ephemeral port range " + std::to_string(lo) + "-" + std::to_string(hi) +
                    " leaves fewer than " + std::to_string(kFewestTestPorts) +
                    " ports outside it for the tests' servers");
    }
    const int fd = ::open(cursor_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return fail("cannot open " + cursor_file + ": " + std::strerror(errno));
    ::fchmod(fd, 0666);  // every user's test processes share it (umask aside)
    while (::flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            const int e = errno;
            ::close(fd);
            return fail("cannot lock " + cursor_file + ": " + std::strerror(e));
        }
    }
    const uint32_t span = uint32_t(window.last) - window.first + 1;
    uint32_t cursor = 0;
    try {
        cursor = uint32_t(std::stoul(read_fd(fd)));
    } catch (const std::exception&) {
        cursor = window.first;  // a new or damaged file: from the window's start
    }
    if (cursor < window.first || cursor > window.last) cursor = window.first;
    uint16_t port = 0;
    for (uint32_t tried = 0; tried < span && port == 0; ++tried) {
        const uint16_t candidate = uint16_t(cursor);
        cursor = cursor == window.last ? window.first : cursor + 1;
        if (bindable(candidate)) port = candidate;
    }
    const std::string next = std::to_string(cursor) + "\n";
    if (::ftruncate(fd, 0) != 0 ||
        ::pwrite(fd, next.data(), next.size(), 0) != ssize_t(next.size())) {
        port = 0;
    }
    ::close(fd);  // the flock goes with it
    if (port == 0)
        return fail("no free port left in " + std::to_string(window.first) + "-" +
                    std::to_string(window.last) + " (or " + cursor_file + " cannot be written)");
    return port;
}

Listening wait_listening(uint16_t port, pid_t pid, int timeout_ms) {
    // How often the port is tried: a server is noticed within this, at no measurable cost.
    constexpr auto kPoll = std::chrono::milliseconds(20);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(port);
        const bool up = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
        if (fd >= 0) ::close(fd);
        if (up) return Listening::kYes;
        siginfo_t info{};
        if (::waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            info.si_pid == pid) {
            return Listening::kExited;
        }
        if (std::chrono::steady_clock::now() >= deadline) return Listening::kTimedOut;
        std::this_thread::sleep_for(kPoll);
    }
}

}  // namespace shmipam::testing
