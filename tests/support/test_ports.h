// Loopback TCP ports for the tests' servers (etcd members, the Kubernetes API stand-in,
// Prometheus, the node exporter) that nothing else can take between the moment a port is chosen
// and the moment its server binds it, nor while a killed server is started again on it.
//
// Two things take ports on a test machine: servers that bind a port by number, and every
// outgoing connection, which the kernel gives a port from its ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range). A port asked of the kernel (bind to 0) comes from
// that range, so a connection opened after it was closed (etcd members dialling each other, a
// helper, another test) may be given the very port before the server binds it. So:
//   - ports are handed out from outside the ephemeral range, where no connection is ever given
//     one;
//   - among the test processes running at once, by one cursor in a file under a flock
//     (kPortCursorFile), so two processes never get the same port: a port comes round again
//     only after every other port of the window has been handed out;
//   - a port some server listens on now is skipped.
// The same protocol is followed by tests/support/kube_api_standin.py (reserve_port), for the
// Python suites. docs/testing.md, "Ports".
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace shmipam::testing {

// The cursor file, shared by every test process of the machine (C++ and Python alike): its
// content is the next port to try, as decimal text; it is read and written under an exclusive
// flock of the file itself.
inline constexpr const char* kPortCursorFile = "/tmp/shmipam-test-ports";

// The window ports are handed out from: the ports from kLowestTestPort up to the ephemeral
// range's first port (or from its last port + 1 up to 65535, where that is the larger). Below
// kLowestTestPort lie the well-known and registered ports of services a test machine may run.
inline constexpr uint16_t kLowestTestPort = 10000;
// Fewer free ports than this outside the ephemeral range and no port is handed out: a window
// that small would come round to a port still in use within one test run.
inline constexpr uint32_t kFewestTestPorts = 1000;

struct PortWindow {
    uint16_t first = 0, last = 0;  // both included; first == 0: no usable window
};
// The window outside `ephemeral` (the kernel's range, both included), as above.
PortWindow port_window(uint16_t ephemeral_first, uint16_t ephemeral_last);

// A port of the window that no other test process has been handed lately and nothing listens
// on; 0 (with `why` set, if given) when none can be had: the ephemeral range leaves no window,
// or the cursor file cannot be locked.
uint16_t reserve_port(std::string* why = nullptr);
// The same with another cursor file: a test of the protocol itself, which must never move the
// cursor the other test processes share.
uint16_t reserve_port_by(const std::string& cursor_file, std::string* why = nullptr);

// A server started on a reserved port: it listens, or it exited first (its port was taken after
// all, or it failed otherwise: its output says which), or it did neither in time.
enum class Listening { kYes, kExited, kTimedOut };
// Polls until something accepts a connection on 127.0.0.1:`port`, or the caller's child `pid`
// exits (left to be reaped by the caller), or `timeout_ms` passes.
Listening wait_listening(uint16_t port, pid_t pid, int timeout_ms);
// A server that exited before it listened is started again on another reserved port this many
// times in all: a port taken twice in a row means a thief the protocol cannot avoid.
inline constexpr int kPortAttempts = 3;

}  // namespace shmipam::testing
