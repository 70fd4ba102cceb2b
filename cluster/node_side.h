// What cluster mode's node pass and recovery ask of the node's own pool states (docs/cluster.md,
// "The node pass", "The store went back in time"): how many addresses of each block are in use
// there, and which fixed claims it holds and its sandboxes use. The states' layout belongs to the
// layers above (the node's runDir and dataDir, a SpiderIPPool's or a subnet's state of one name),
// so the pass and recovery are handed this view: tools/cluster_node_use.h reads the real states,
// the unit tests hand a made-up node.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/ops/allocator.h"

namespace shmipam::cluster {

struct BlockUse {
    uint64_t in_use = 0;               // addresses neither free nor cooling
    uint64_t last_release_unix_s = 0;  // when an address of it was last released (0: never)
};

struct PoolUse {
    // What the node has of the pool:
    //  kArenas:  a state in runDir, read: `blocks` is the truth of this node;
    //  kUnknown: no state readable in runDir while the pool's journal is in dataDir (after a
    //            reboot, before the pool's first ADD rebuilds the state; or the runDir not where
    //            the config says, as in a container missing its mount) or a state that cannot
    //            be read: what is in use cannot be told, so no block counts as idle;
    //  kNone:    no state and no journal: the node never allocated from the pool (or its files
    //            were removed), and nothing on it can hold an address of the pool.
    enum class Found { kArenas, kUnknown, kNone } found = Found::kNone;
    std::vector<std::string> arenas;         // their directories (a pool's and a subnet's)
    std::map<std::string, BlockUse> blocks;  // by block CIDR (of the cluster's block prefix)
    std::string why;                         // kUnknown: what was found
};

class NodeSide {
  public:
    virtual ~NodeSide() = default;
    // What the node's states of `pool` say of its blocks cut at `block_prefix`.
    virtual PoolUse pool_use(const std::string& pool, int block_prefix) = 0;
    // Whether the node has any state of the pool now, arena or journal (an ADD made one).
    virtual bool has_pool_state(const std::string& pool) = 0;
    // Every fixed claim the node's state of `pool` holds, in use or idle (none: no state of
    // the pool here). Fixed claims are made in the pool's own state, never a subnet's.
    virtual std::vector<engine::ClaimView> claims_held(const std::string& pool) = 0;

    // Those a sandbox here uses.
    std::vector<engine::ClaimView> claims_in_use(const std::string& pool) {
        std::vector<engine::ClaimView> out;
        for (auto& c : claims_held(pool)) {
            if (c.use == engine::ClaimView::Use::kInUse) out.push_back(std::move(c));
        }
        return out;
    }
};

}  // namespace shmipam::cluster
