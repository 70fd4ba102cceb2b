// End-to-end tests need root (network namespaces). Outside CI they skip with a message when not
// root; in CI (CI=true) a skip would hide a broken test, so it is a failure instead.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace shmipam::testing {

inline bool in_ci() {
    const char* ci = std::getenv("CI");
    return ci != nullptr && std::string(ci) == "true";
}

#define SHMIPAM_REQUIRE_ROOT()                                                             \
    do {                                                                                   \
        if (::geteuid() != 0) {                                                            \
            if (::shmipam::testing::in_ci()) FAIL() << "end-to-end tests need root in CI"; \
            GTEST_SKIP() << "not root: end-to-end tests need network namespaces";          \
        }                                                                                  \
    } while (0)

}  // namespace shmipam::testing
