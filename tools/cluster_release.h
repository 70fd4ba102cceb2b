// The cluster helper's release of an empty block (docs/cluster.md, "Giving a block back").
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/block_store.h"

namespace shmipam::cluster_helper {

struct ReleaseRequest {
    std::string pool, node, state_dir;
    engine::Cidr block;
    std::string pool_state;  // the node's arena directory of the pool (<runDir>/_pools/...)
    uint64_t min_age_s = 300;
};

// Gives `block` back when the store still gives it to the node, the node keeps another block of
// the pool, the block is older than min_age_s and no address of it is in use or cooling: the
// block is held whole in the arena, dropped from the node's cache, deleted in the store at the
// revision read, and let go. `owned` is the pool's blocks as the store said just now. Answers
// {"released": CIDR or null, "why": "..."}; the block's due file is rewritten or removed.
Expected<nlohmann::json> release_block(const ReleaseRequest& r, cluster::BlockStore& store,
                                       const std::vector<cluster::Block>& owned);

}  // namespace shmipam::cluster_helper
