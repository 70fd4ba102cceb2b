// One pool's blocks, idle records, waiting nodes and geometry as one read of the store (one
// range over <prefix>/v1/pools/<pool>/, so one revision). The give-back rule
// (cluster/give_back_rule.h) compares them: read at different revisions, a block given back
// meanwhile would be counted twice (its record gone, the block still there) or not at all, and
// the idle nodes' passes running at once would disagree on who gives back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/block_store.h"
#include "cluster/kv_store.h"
#include "cluster/waiting.h"

namespace shmipam::cluster {

struct PoolSnapshot {
    std::vector<Block> blocks;
    std::vector<IdleBlock> idle;
    std::vector<Waiter> waiters;  // those still waiting at `now` (kWaitingFreshS)
    std::optional<BlockStore::Geometry> geometry;
};

Expected<PoolSnapshot> read_pool_snapshot(KvStore& store, const std::string& prefix,
                                          const std::string& pool, uint64_t now);

}  // namespace shmipam::cluster
