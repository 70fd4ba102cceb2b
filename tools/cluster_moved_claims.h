// Fixed claims a sandbox on this node still uses while the store no longer gives them to it as
// the sandbox holds them (docs/cluster.md, "Fixed addresses across nodes"): reported by the node
// pass and by `cluster ls`, since those sandboxes must not use their address any more.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/kv_store.h"
#include "tools/cluster_setup.h"
#include "tools/render/cluster.h"

namespace shmipam::tools {

// For each fixed claim of `pool` in use by a sandbox here (the node's pool state), a row when
// the store's claim is another node's (a pod started there took it over), is this node's on
// another address (made again meanwhile), or is gone. The node's claims are read before the
// store's: a claim an ADD makes here is taken in the store first, so one seen here has its
// store claim in the read that follows unless it moved or went since (then it is reported).
Expected<std::vector<PassRow>> moved_claims(const ClusterSetup& setup, cluster::KvStore& etcd,
                                            const std::string& pool);

}  // namespace shmipam::tools
