// Cluster mode's side of an ADD (docs/cluster.md): the addresses of a pool that lie in this
// node's blocks (read from the node's block cache, no etcd call), and the cluster helper exec'd
// when the node needs another block.
#pragma once

#include <optional>
#include <string>

#include "base/status.h"
#include "engine/addr/ip_address.h"
#include "plugin/netconf.h"
#include "pools/ip_set.h"

namespace shmipam::cni {

// Where the node's block caches and its pinned cluster id live: <dataDir>/_cluster.
std::string cluster_state_dir(const NetConf& nc);

// `usable` narrowed to the blocks this node owns of `pool`, as its cache says.
Expected<pools::IpSet> in_own_blocks(const NetConf& nc, const std::string& pool,
                                     const pools::IpSet& usable);

// Asks the cluster helper for a block of `pool` (the one holding `address`, if given); true when
// the node has a new block (the cache was rewritten), false when none is left or the node is at
// its cap (`why` says which). The helper's error otherwise (50: etcd unavailable).
// Only blocks with some of `usable` in them are claimed.
Expected<bool> claim_block(const NetConf& nc, const std::string& pool, const engine::Cidr& cidr,
                           const pools::IpSet& usable,
                           const std::optional<engine::IpAddress>& address, std::string* why);

}  // namespace shmipam::cni
