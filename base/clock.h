// Clocks. Cool-downs and lease ages use CLOCK_BOOTTIME: it never jumps (unlike the wall clock)
// and keeps counting through suspend (unlike CLOCK_MONOTONIC). Wall time is for display only.
#pragma once

#include <time.h>

#include <cstdint>

namespace shmipam::base {

inline uint64_t boot_ns() {
    timespec ts{};
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

inline uint64_t unix_ns() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

}  // namespace shmipam::base
