// `shmipamctl cluster gc`'s decisions (docs/cluster.md, "Nodes that are gone"): the blocks and
// fixed claims of nodes missing from the cluster's Node list, each given back or kept, and why.
// The store is read before the node list is taken, and every delete compares the revision
// read: a block claimed after the store was read is never seen, one claimed after the list was
// taken or within blockMinAgeS is kept, and one claimed again meanwhile is left. So a gc never
// races a live node, whatever the list's age. A fixed claim of a node gone goes by its reclaim
// policy; the pod's next start on any node takes it over meanwhile.
#pragma once

#include <cstdint>
#include <ctime>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "cluster/block_store.h"
#include "cluster/fixed_claims.h"
#include "cluster/guarded_store.h"

namespace shmipam::cluster {

struct GcRow {
    std::string pool, block, node;  // block: a CIDR, or "claim <key> (<address>)"
    bool released = false;  // false in a dry run, or when the block changed since it was read
    // Why a block or claim of a node not in the list is kept, or "".
    std::string kept;
};

struct GcPlan {
    // Every pool's blocks, then every fixed claim, as the store gave them before the list.
    std::map<std::string, std::vector<Block>> blocks;
    std::vector<std::pair<std::string, FixedClaim>> claims;
    std::set<std::string> live_nodes;
    time_t list_taken_at = 0;
    uint64_t block_min_age_s = 300;
    std::string named_pod;  // "<namespace>/<name>": its fixed claims go whatever their policy
    bool apply = false;     // false: a dry run, nothing written
    bool force = false;     // even when no node owning anything is in the list
};

// The rows of a gc, carried out in `store` when `plan.apply`. Code 7, with nothing written, for
// a list that names no node, or none of the nodes owning blocks or claims (unless force): that
// is almost surely the wrong list, and would give every block of the cluster away.
Expected<std::vector<GcRow>> collect_garbage(GuardedStore& store, const GcPlan& plan, time_t now);

}  // namespace shmipam::cluster
