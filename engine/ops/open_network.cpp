#include "engine/ops/open_network.h"

#include "engine/recovery/fill_new_index.h"

namespace shmipam::engine {

Expected<std::unique_ptr<NetworkStore>> open_network(const NetworkConfig& cfg,
                                                     const shm::ProcessIdentity& self) {
    return NetworkStore::open(cfg, self, fill_new_index(cfg));
}

}  // namespace shmipam::engine
