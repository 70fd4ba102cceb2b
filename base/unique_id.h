// Random 64-bit values for names that must not collide (an index's epoch, a temp file's name),
// never for secrets. getrandom(2) without blocking: at early boot, before the kernel's generator
// is initialised, it would block (std::random_device may), and the reboot storm of first ADDs
// happens exactly then. Without entropy yet, the value mixes the boot clock, the wall clock, the
// pid and a per-process counter (splitmix64): unique enough for names checked by link().
#pragma once

#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "base/clock.h"

namespace shmipam::base {

inline uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

inline uint64_t unique_id() {
    uint64_t v = 0;
    if (::getrandom(&v, sizeof v, GRND_NONBLOCK) == ssize_t(sizeof v)) return v;
    static std::atomic<uint64_t> counter{0};
    return mix64(boot_ns() ^ mix64(unix_ns()) ^ (uint64_t(::getpid()) << 40) ^
                 counter.fetch_add(1, std::memory_order_relaxed));
}

}  // namespace shmipam::base
