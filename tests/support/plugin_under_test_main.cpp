// The crash tests' plugin: the production plugin (plugin/process.h) with its instruments, built
// only with fault points (the `faults` preset). It reads what the production binary never does:
//   SHMIPAM_FAULT=<point> [SHMIPAM_FAULT_MODE=kill] [SHMIPAM_FAULT_SKIP=n]   die at a named step
//   SHMIPAM_FAULT_STRETCH_US=n    sleep n µs at every step (widens windows for random kills)
//   SHMIPAM_STORAGE_TRACE=<file>  record every storage change (tracing_file_system.h)
#include <cstdlib>
#include <memory>
#include <string>

#include "base/fault_point.h"
#include "plugin/process.h"
#include "tests/support/tracing_file_system.h"

namespace {

void arm_fault_points_from_env() {
    if (const char* us = std::getenv("SHMIPAM_FAULT_STRETCH_US")) {
        shmipam::faults::stretch(std::atoi(us));
    }
    const char* point = std::getenv("SHMIPAM_FAULT");
    if (point == nullptr || *point == '\0') return;
    const char* mode = std::getenv("SHMIPAM_FAULT_MODE");
    const char* skip = std::getenv("SHMIPAM_FAULT_SKIP");
    shmipam::faults::arm(point,
                         mode != nullptr && std::string(mode) == "kill"
                             ? shmipam::faults::Mode::kKill
                             : shmipam::faults::Mode::kExit,
                         skip != nullptr ? std::atoi(skip) : 0);
}

}  // namespace

int main() {
    arm_fault_points_from_env();
    const char* trace = std::getenv("SHMIPAM_STORAGE_TRACE");
    if (trace == nullptr || *trace == '\0') shmipam::cni::serve_invocation();
    shmipam::testing::TracingFileSystem tracing(trace);
    shmipam::shm::install_file_system(&tracing);
    shmipam::cni::ProcessHooks hooks;
    hooks.began = [&](const std::string& cmd, const std::string& id) { tracing.began(cmd, id); };
    hooks.answering = [&](const std::string& cmd, const std::string& id) {
        tracing.answering(cmd, id);
    };
    // Exits: the trace's lines are written as they happen (one write each).
    shmipam::cni::serve_invocation(hooks);
}
