// A node's recovery after the store went back in time (docs/cluster.md, "The store went back in
// time"), run by `shmipamctl cluster recover` (tools/verbs/cluster_recover.cpp) over etcd and
// the node's real states, and by the unit tests over the in-memory store and a made-up node.
// After etcd was rebuilt from nothing or restored from a snapshot, each node puts back into the
// store what it still holds (the blocks in its block caches, the fixed claims in its pool
// states of fixedAddressPools pools), each created only if absent, never taken from another
// node; and when all of it is in the store again, the node accepts the new store (its
// remembered revision reset to the store's, its cluster id too), so its agents claim again.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/guarded_store.h"
#include "cluster/node_files.h"
#include "cluster/node_side.h"

namespace shmipam::cluster {

struct RecoverRow {
    enum class Outcome {
        kPresent,    // the store gives it to this node already
        kMissing,    // dry run: absent from the store, would be re-created
        kRecreated,  // re-created in the store for this node
        kConflict,   // the store gives it (or its address) to another node: left alone
        kCannot,     // this node cannot say what to re-create (a cache or state unreadable)
    };
    std::string pool;
    std::string what;  // "block 10.1.0.64/26", "claim sts:shop/db-0/eth0 (10.9.0.5)"
    Outcome outcome = Outcome::kPresent;
    std::string why;  // kConflict, kCannot
};

struct RecoverReport {
    std::string node;
    std::vector<RecoverRow> rows;
    int64_t store_revision = 0;       // the store's revision when first read (before changes)
    int64_t accepted_revision = 0;    // accepted: the revision the node remembers now
    int64_t remembered_revision = 0;  // the node's floor before (0: none)
    std::string floor_problem;        // the floor file could not be read (recovery rewrites it)
    bool floor_ahead = false;         // the store is behind the node: it went back in time
    bool id_changed = false;          // the store's cluster id is not the one remembered
    bool accepted = false;            // --apply: the floor and cluster id were reset

    size_t count(RecoverRow::Outcome o) const;
    // Whether a dry run found something to do (exit 1), or an apply left something undone.
    bool work_left(bool applied) const;
};

// The node recovery runs for.
struct RecoverNode {
    std::string node;
    NodeFiles files;
    std::set<std::string> fixed_pools;  // ipam.fixedAddressPools
    uint64_t lock_wait_ms = 0;          // for the pool lock
};

// Compares what the node holds with the store and, with `apply`, re-creates what is missing
// and accepts the store when nothing is in conflict. `store` is opened with neither the cluster
// id nor the revision floor guarded (this is the way out of those refusals; the report says
// what they found) and without stamping the schema. An error only when the store or the
// node's directory cannot be read at all (nothing was changed then, or only re-creations,
// which a second run finds present).
Expected<RecoverReport> recover_node(GuardedStore& store, const RecoverNode& n, NodeSide& side,
                                     bool apply);

}  // namespace shmipam::cluster
