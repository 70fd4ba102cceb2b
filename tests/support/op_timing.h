// How long one plugin call takes on this machine, now. Tests that kill a process "somewhere
// inside" an operation scale their kill windows to it instead of to fixed microseconds: on a
// machine three times slower, a fixed window would have most kills land before the process did
// anything, and the state the test means to reach (a compaction, a lease held by a dead
// process) would not be reached.
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace shmipam::testing {

// The median wall time, from spawn to exit, of `samples` sequential ADDs (each followed by its
// DEL) of the plugin with `config` and `extra_env`, on a scratch copy of the network (its own
// dataDir and runDir): the test's own state is not touched.
std::chrono::microseconds median_add_time(const nlohmann::json& config,
                                          const std::map<std::string, std::string>& extra_env = {},
                                          int samples = 15);

}  // namespace shmipam::testing
