// Opening a network's state: what every operation, shmipamctl verb and benchmark does first.
// A new index is filled by recovery (a rebuild from the journal or a host-local import).
#pragma once

#include <memory>

#include "engine/state/network_config.h"
#include "engine/state/network_store.h"
#include "shm/process_identity.h"

namespace shmipam::engine {

Expected<std::unique_ptr<NetworkStore>> open_network(const NetworkConfig& cfg,
                                                     const shm::ProcessIdentity& self);

// As the calling process (what an invocation does).
inline Expected<std::unique_ptr<NetworkStore>> open_network(const NetworkConfig& cfg) {
    return open_network(cfg, shm::current_process());
}

}  // namespace shmipam::engine
