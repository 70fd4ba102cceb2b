// The node pass's decisions in the cluster store (docs/cluster.md, "The node pass"): per pool,
// the node's block cache brought in line with the store (blocks adopted, blocks taken from the
// node dropped), idle blocks recorded and given back to waiting nodes, a withdrawn pool's blocks
// given back, and fixed claims a sandbox here uses while the store says otherwise. Run by
// `shmipamctl cluster pass` (tools/verbs/cluster_pass.cpp) over etcd and the node's real
// states, and by the unit tests over the in-memory store and a made-up node.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/block_store.h"
#include "cluster/guarded_store.h"
#include "cluster/node_files.h"
#include "cluster/node_side.h"
#include "cluster/waiting.h"

namespace shmipam::cluster {

// One thing the node pass did or found: a block it changed in the node's cache, a fixed claim
// a sandbox here uses while the store's claim says otherwise, or a pool it could not pass.
struct PassRow {
    enum class Action { kAdopted, kDropped, kGaveBack, kMoved, kHealed, kFailed };
    std::string pool, block;
    Action action = Action::kAdopted;
    uint64_t in_use = 0;               // dropped: addresses still in use here in it
    std::string owner;                 // dropped: who owns it in the store now ("" for none)
    std::vector<std::string> waiters;  // gave back: the nodes that waited for a block
    std::string container;             // moved: the sandbox here still using the claim
    // moved: how the store's claim differs; failed: the pool's error; gave back with no
    // waiters: why (its pool is no longer configured)
    std::string why;
};

// The node a pass runs for.
struct PassNode {
    std::string node;
    NodeFiles files;
    uint64_t block_min_age_s = 300;  // ipam.blockMinAgeS
    uint64_t lock_wait_ms = 0;       // for the pool lock
};

// One pass over one block pool, under its pool lock (agents write the cache under it too): the
// cache rewritten to what the store gives the node, then blocks given back (`configured`: the
// pool is still in the node's pool files; otherwise every empty block goes back).
Expected<std::vector<PassRow>> pass_pool(GuardedStore& store, const PassNode& n, NodeSide& side,
                                         const std::string& pool, bool configured);

// For each fixed claim of `pool` in use by a sandbox here, a row when the store's claim is
// another node's (a pod started there took it over), is this node's on another address (made
// again meanwhile), or is gone. The node's claims are read before the store's: a claim an ADD
// makes here is taken in the store first, so one seen here has its store claim in the read
// that follows unless it moved or went since (then it is reported).
Expected<std::vector<PassRow>> moved_claims(KvStore& store, const std::string& prefix,
                                            const std::string& node, NodeSide& side,
                                            const std::string& pool);

// The node pass's part of "no node shut out": records which of the node's blocks of the pool
// have no address in use, clears the record of one in use again, and gives one idle block back
// when nodes wait and the rule of cluster/give_back_rule.h picks this node, even the node's
// last block. `in_store`: the pool's blocks as the store gave them just now; the caller holds
// the pool lock. The block given back, if one was.
Expected<std::optional<PassRow>> give_back_for_waiters(BlockStore& store, Waiting& waiting,
                                                       const PassNode& n, NodeSide& side,
                                                       const std::string& pool,
                                                       const std::vector<Block>& in_store);

// A pool no longer configured on the node: every block of it the node owns with no address in
// use or cooling is given back, even the last, so that the pool can be dropped from the cluster
// (docs/cluster.md, "Changing a pool's CIDR or block size").
Expected<std::vector<PassRow>> give_back_withdrawn(BlockStore& store, Waiting& waiting,
                                                   const PassNode& n, NodeSide& side,
                                                   const std::string& pool,
                                                   const std::vector<Block>& in_store);

}  // namespace shmipam::cluster
