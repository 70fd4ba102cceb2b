// The tests' port protocol (tests/support/test_ports.h): a port handed to a server is one no
// outgoing connection can be given meanwhile (outside the ephemeral range) and no other test
// process is handed too. A port asked of the kernel and closed again (bind to 0) is neither: an
// etcd member once failed to start with "bind: address already in use" because of it.
#include "tests/support/test_ports.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

std::pair<unsigned, unsigned> ephemeral_range() {
    unsigned lo = 0, hi = 0;
    std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> lo >> hi;
    return {lo, hi};
}

TEST(TestPorts, TheWindowLiesOutsideTheEphemeralRange) {
    EXPECT_EQ(port_window(32768, 60999).first, kLowestTestPort);
    EXPECT_EQ(port_window(32768, 60999).last, 32767);
    // Ephemeral ports low: the window lies above them.
    EXPECT_EQ(port_window(1024, 30000).first, 30001);
    EXPECT_EQ(port_window(1024, 30000).last, 65535);
    // No room outside: no window, never a port inside the range.
    EXPECT_EQ(port_window(1024, 65535).first, 0);
    EXPECT_EQ(port_window(10500, 65000).first, 0);
}

// Four processes at once, each reserving many ports: none handed out twice, none inside the
// kernel's ephemeral range, each one bindable when handed out.
TEST(TestPorts, ConcurrentProcessesAreNeverHandedTheSamePortNorAnEphemeralOne) {
    constexpr int kProcesses = 4, kPortsEach = 100;
    const auto [lo, hi] = ephemeral_range();
    ASSERT_GT(lo, 0u);
    std::vector<int> reads;
    std::vector<pid_t> pids;
    for (int p = 0; p < kProcesses; ++p) {
        int fds[2];
        ASSERT_EQ(::pipe(fds), 0);
        const pid_t pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            ::close(fds[0]);
            for (int i = 0; i < kPortsEach; ++i) {
                const uint16_t port = reserve_port();
                if (::write(fds[1], &port, sizeof port) != sizeof port) ::_exit(2);
            }
            ::_exit(0);
        }
        ::close(fds[1]);
        reads.push_back(fds[0]);
        pids.push_back(pid);
    }
    std::set<uint16_t> seen;
    size_t handed = 0;
    for (int fd : reads) {
        uint16_t port = 0;
        while (::read(fd, &port, sizeof port) == sizeof port) {
            ++handed;
            EXPECT_NE(port, 0);
            EXPECT_TRUE(port < lo || port > hi)
                << port << " is in the ephemeral range " << lo << "-" << hi;
            EXPECT_TRUE(seen.insert(port).second) << port << " handed out twice";
        }
        ::close(fd);
    }
    for (pid_t pid : pids) {
        int status = 0;
        ::waitpid(pid, &status, 0);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    EXPECT_EQ(handed, size_t(kProcesses * kPortsEach));
}

// A port a server listens on is passed over, even where the cursor points at it. (A cursor of
// the test's own: moving the shared one back would hand other test processes ports again.)
TEST(TestPorts, APortSomeServerListensOnIsSkipped) {
    TempDir dir;
    const std::string cursor = dir.sub("cursor");
    const uint16_t taken = reserve_port();
    ASSERT_NE(taken, 0);
    const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(taken);
    ASSERT_EQ(::bind(server, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(server, 1), 0);
    write_file(cursor, std::to_string(taken) + "\n");
    const uint16_t next = reserve_port_by(cursor);
    EXPECT_NE(next, 0);
    EXPECT_NE(next, taken);
    ::close(server);
}

}  // namespace
}  // namespace shmipam::testing
