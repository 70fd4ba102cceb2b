// Recording the configuration an invocation opened the network with, for display (the reading
// side is NetworkStore::ranges_text and reuse_delay_ms).
#pragma once

#include "engine/state/network_config.h"
#include "shm/format.h"

namespace shmipam::engine {

void record_config(format::IndexHeader& h, const NetworkConfig& cfg);

}  // namespace shmipam::engine
