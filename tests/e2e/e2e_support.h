// End-to-end tests need root (network namespaces). Outside CI they skip with a message when not
// root; in CI (CI=true) a skip would hide a broken test, so it is a failure instead.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

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

// podman with its storage under `dir` (vfs: no mounts left behind), cgroupfs and file events
// (no systemd in CI), and runc through tests/support/runc_without_rlimits (says why).
inline std::vector<std::string> podman_argv(const std::string& dir) {
    return {"/usr/bin/podman",
            "--root",
            dir + "/storage",
            "--runroot",
            dir + "/runroot",
            "--storage-driver",
            "vfs",
            "--runtime",
            RUNC_WITHOUT_RLIMITS_PATH,
            "--cgroup-manager",
            "cgroupfs",
            "--events-backend",
            "file"};
}

// Fails in CI, skips elsewhere, when a tool the test drives is not installed.
#define SHMIPAM_REQUIRE_TOOL(path)                                                             \
    do {                                                                                       \
        if (::access(path, X_OK) != 0) {                                                       \
            if (::shmipam::testing::in_ci()) FAIL() << path << " is not installed";            \
            GTEST_SKIP() << path << " is not installed (scripts/install-deps.sh installs it)"; \
        }                                                                                      \
    } while (0)

}  // namespace shmipam::testing
