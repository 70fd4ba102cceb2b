// Making a node's StatefulSet recheck due when a test says so (ipam/owner_claims.cpp: a walk runs
// after an answer once the marker <runDir>/.statefulset-recheck is older than the period).
//
// A test that counts rechecks sets a period longer than itself and ages the marker where it wants
// the next walk: with a short period, an answer that happens to come a period after the last
// walk (a loaded machine; the period is judged in whole seconds) runs one more walk than the test
// planned, and its count is off by one.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>

#include <cstdint>
#include <ctime>
#include <string>

namespace shmipam::testing {

// A period no test outlasts.
inline constexpr uint64_t kRecheckPeriodLongerThanATest = 3600;

// Sets the marker's time two periods back; false when there is no marker (no walk ran yet:
// the next answer walks anyway).
inline bool make_recheck_due(const std::string& run_dir,
                             uint64_t period_s = kRecheckPeriodLongerThanATest) {
    const std::string marker = run_dir + "/.statefulset-recheck";
    const time_t then = ::time(nullptr) - 2 * time_t(period_s);
    const timespec times[2] = {{then, 0}, {then, 0}};
    return ::utimensat(AT_FDCWD, marker.c_str(), times, 0) == 0;
}

}  // namespace shmipam::testing
