// Spawning CNI plugin invocations the way a container runtime does: a fresh process per call
// (posix_spawn), the CNI environment, the network config on stdin; timed from spawn to reap.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shmipam::bench {

struct ExecResult {
    int exit_code = -1;
    double micros = 0;
    double cpu_micros = 0;  // the child's user + system CPU time (from wait4)
    std::string out;
};

ExecResult spawn_and_wait(const std::string& binary, const std::map<std::string, std::string>& env,
                          const std::string& input);

struct Percentiles {
    double p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
};
Percentiles percentiles(std::vector<double> samples);

}  // namespace shmipam::bench
