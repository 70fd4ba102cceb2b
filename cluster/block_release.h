// The cluster agent's release of an empty block (docs/cluster.md, "Giving a block back").
#pragma once

#include <functional>
#include <vector>

#include "base/status.h"
#include "cluster/block_store.h"
#include "cluster/helper_protocol.h"

namespace shmipam::cluster {

// Gives `block` back when the store still gives it to the node, the node keeps another block of
// the pool, the block is older than min_age_s and no address of it is in use or cooling: the
// block is held whole in the arena, dropped from the node's cache, deleted in the store at the
// revision read, and let go. `owned` is the pool's blocks as the store said just now. The
// block's release mark is rewritten (a later second) or removed.
Expected<protocol::ReleaseAnswer> release_block(const protocol::ReleaseBlock& r, BlockStore& store,
                                                const std::vector<Block>& owned);

// The same for a block of a pool of which the node has no state at all (no arena in its runDir,
// no journal in its dataDir: never used there), so that nothing on the node can hold an address
// of it and there is no arena to hold: the block leaves the cache, then `state_made` is asked
// whether an ADD made the pool's state meanwhile (then the block is put back and kept), then it
// is deleted in the store at the revision read. The caller holds the pool lock.
Expected<protocol::ReleaseAnswer> release_unused_block(const protocol::ReleaseBlock& r,
                                                       BlockStore& store,
                                                       const std::vector<Block>& owned,
                                                       const std::function<bool()>& state_made);

}  // namespace shmipam::cluster
