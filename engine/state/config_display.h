// Recording the configuration an invocation opened the network with, for display (the reading
// side is NetworkStore::ranges_text and reuse_delay_ms).
#pragma once

#include "engine/state/network_config.h"
#include "shm/format.h"

namespace shmipam::engine {

// As cfg.display says: the ranges and reuseDelay, nothing, or the shown ranges marked withdrawn
// (kWithdrawnMark appended once).
void record_config(format::IndexHeader& h, const NetworkConfig& cfg);

inline constexpr const char* kWithdrawnMark = " (withdrawn: no longer configured)";

}  // namespace shmipam::engine
