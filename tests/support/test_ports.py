#!/usr/bin/python3
"""Loopback ports for the tests' servers, by the protocol of tests/support/test_ports.h (which
says why): outside the kernel's ephemeral range, handed out by one cursor in a file under its
flock, shared with the C++ fixtures. Run as a program it prints one reserved port (for
scripts/local-etcd.sh)."""

import fcntl
import os
import socket
import sys

PORT_CURSOR_FILE = "/tmp/shmipam-test-ports"
LOWEST_TEST_PORT = 10000
FEWEST_TEST_PORTS = 1000
# A server whose reserved port was taken after all is started again on another this many times.
PORT_ATTEMPTS = 3


def port_window(ephemeral_first, ephemeral_last):
    """The ports outside the kernel's ephemeral range that tests hand out, or None."""
    below = max(ephemeral_first - LOWEST_TEST_PORT, 0)
    above = max(65535 - ephemeral_last, 0)
    if below >= above and below >= FEWEST_TEST_PORTS:
        return LOWEST_TEST_PORT, ephemeral_first - 1
    first = max(ephemeral_last + 1, LOWEST_TEST_PORT)
    if above >= FEWEST_TEST_PORTS and 65535 - first + 1 >= FEWEST_TEST_PORTS:
        return first, 65535
    return None


def _bindable(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def reserve_port():
    """A loopback port outside the ephemeral range that no other test process was handed lately
    and nothing listens on (the cursor in PORT_CURSOR_FILE, under its flock)."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        lo, hi = (int(x) for x in f.read().split())
    window = port_window(lo, hi)
    if window is None:
        raise RuntimeError("the ephemeral port range %d-%d leaves fewer than %d ports outside it"
                           % (lo, hi, FEWEST_TEST_PORTS))
    first, last = window
    fd = os.open(PORT_CURSOR_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        os.fchmod(fd, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            cursor = int(os.pread(fd, 32, 0).decode().strip())
        except ValueError:
            cursor = first
        if not first <= cursor <= last:
            cursor = first
        port = None
        for _ in range(last - first + 1):
            candidate = cursor
            cursor = first if cursor == last else cursor + 1
            if _bindable(candidate):
                port = candidate
                break
        os.ftruncate(fd, 0)
        os.pwrite(fd, b"%d\n" % cursor, 0)
    finally:
        os.close(fd)
    if port is None:
        raise RuntimeError("no free port left in %d-%d" % (first, last))
    return port


if __name__ == "__main__":
    print(reserve_port())
    sys.exit(0)
