// No node shut out (docs/cluster.md): the node pass's part. It records in the store which of
// the node's blocks of a pool have no address in use (idle since their last release, or their
// claim when they never had one here), clears the record of a block in use again, and gives
// one idle block back when nodes wait for one and the rule of cluster/give_back_rule.h picks
// this node, even the node's last block of the pool.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/block_store.h"
#include "cluster/node_files.h"
#include "cluster/waiting.h"
#include "tools/cluster_setup.h"
#include "tools/render/cluster.h"

namespace shmipam::tools {

// `in_store`: the pool's blocks as the store gave them just now; the caller holds the pool
// lock. The block given back, if one was.
Expected<std::optional<PassRow>> give_back_for_waiters(const ClusterSetup& setup,
                                                       cluster::BlockStore& store,
                                                       cluster::Waiting& waiting,
                                                       const cluster::NodeFiles& files,
                                                       const std::string& pool,
                                                       const std::vector<cluster::Block>& in_store);

// A pool no longer configured on the node (its pool file removed): every block of it the node
// owns with no address in use or cooling is given back, even the last, so that the pool can be
// dropped from the cluster (docs/cluster.md, "Changing a pool's CIDR or block size"). The
// caller holds the pool lock and has checked that the node's pool files say so.
Expected<std::vector<PassRow>> give_back_withdrawn(const ClusterSetup& setup,
                                                   cluster::BlockStore& store,
                                                   cluster::Waiting& waiting,
                                                   const cluster::NodeFiles& files,
                                                   const std::string& pool,
                                                   const std::vector<cluster::Block>& in_store);

}  // namespace shmipam::tools
