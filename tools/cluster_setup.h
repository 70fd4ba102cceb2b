// What shmipamctl's cluster verbs (ls, gc, pass) read of a node: the etcd settings, the node's
// name, its dataDir and runDir from the network config its plugin uses (--config, a config or
// a conflist), and the store's blocks (docs/cluster.md, "Operating it").
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/block_store.h"
#include "cluster/etcd_client.h"
#include "cluster/guarded_store.h"

namespace shmipam::tools {

struct ClusterSetup {
    nlohmann::json etcd;
    std::string node, data_dir, run_dir;
    uint64_t block_min_age_s = 300;     // ipam.blockMinAgeS
    std::set<std::string> fixed_pools;  // ipam.fixedAddressPools
    std::string pools_dir;              // ipam.poolsDir

    std::string state_dir() const { return data_dir + "/_cluster"; }
};

// The ipam section holding "etcd" in the network config or conflist `config`. The node is
// `node`, else the config's nodeName, else its nodeNameFile's (never the host name), and must
// be a Kubernetes node name (code 7 otherwise); the run directory is the config's runDir, else
// `run_dir`.
Expected<ClusterSetup> read_setup(const std::string& config, const std::string& node,
                                  const std::string& run_dir);

// The store of the config's etcd opened through `guards` (cluster/guarded_store.h: code 7 when
// the store is another cluster's, went back in time, or holds another layout), and every
// pool's blocks as it says now. Readers never stamp an empty store.
struct StoreView {
    std::unique_ptr<cluster::EtcdClient> client;
    std::unique_ptr<cluster::GuardedStore> store;  // over `client`
    std::map<std::string, std::vector<cluster::Block>> blocks;
    std::vector<std::string> unreadable;  // keys of values that are not what their key says
};
Expected<StoreView> read_store(const ClusterSetup& setup, cluster::Guards guards);

// Node names from a file (or - for stdin): a JSON list of names, a Kubernetes NodeList
// (`kubectl get nodes -o json`), or one name per line (code 6 for anything else).
Expected<std::set<std::string>> read_live_nodes(const std::string& path);

}  // namespace shmipam::tools
