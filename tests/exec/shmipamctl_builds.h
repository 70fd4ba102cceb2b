// Both builds of shmipamctl a test runs against: the dynamic one, and the image's static one
// when the build makes it (SHMIPAMCTL_STATIC_PATH, tests/CMakeLists.txt).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace shmipam::testing {

inline std::vector<std::string> shmipamctls() {
    std::vector<std::string> out{SHMIPAMCTL_PATH};
#ifdef SHMIPAMCTL_STATIC_PATH
    out.push_back(SHMIPAMCTL_STATIC_PATH);
#endif
    return out;
}

// "Static" or "Dynamic", for a parameterised test's name.
inline std::string build_name(const ::testing::TestParamInfo<std::string>& i) {
    return i.param.ends_with("-static") ? "Static" : "Dynamic";
}

}  // namespace shmipam::testing
