// The pool-mode and cluster-mode parts of a network config's ipam section (docs/pools.md,
// docs/cluster.md, "Configuration"): read here, beside what uses them; plugin/netconf.cpp reads
// the rest.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "base/status.h"
#include "engine/state/network_config.h"
#include "pools/selection.h"

namespace shmipam::ipam {

// Cluster mode: the pools are shared by the nodes, cut into blocks a node claims in etcd through
// the cluster helper; the plugin allocates inside its own blocks.
struct ClusterMode {
    nlohmann::json etcd;       // ipam.etcd, passed to the helper as written
    uint64_t budget_ms = 0;    // ipam.etcd.budgetMs: bounds each store call, and so lock waits
    uint64_t max_blocks = 32;  // ipam.maxBlocksPerNode
    // ipam.claimAheadPercent: when the node's blocks of a pool are this full (free addresses
    // under (100 - N)% of a block), an ADD starts the helper, detached, for the next block.
    // 0: only when they are full.
    uint64_t claim_ahead_percent = 75;
    // ipam.blockMinAgeS: a block left with no address in use is given back to the cluster once
    // it is this old (and its addresses have cooled down); the node keeps one block per pool.
    uint64_t block_min_age_s = 300;
    // ipam.fixedAddressPools: pools never cut into blocks, whose addresses are claimed one by
    // one in etcd by StatefulSet pods' fixed claims (docs/cluster.md).
    std::set<std::string> fixed_pools;
    std::string helper;  // ipam.clusterHelper, else shmipam-cluster beside the plugin
};

// Pool mode (ipam.poolsDir): Spiderpool-style pools instead of ranges.
// Where the install container writes the node's name (ipam.nodeNameFile changes it).
inline constexpr const char* kDefaultNodeNameFile = "/var/lib/shmipam/nodename";
// A Kubernetes node name is a DNS subdomain: at most 253 bytes.
inline constexpr size_t kMaxNodeNameBytes = 253;

struct PoolMode {
    std::string pools_dir;
    pools::PoolConfig config;
    // ipam.nodeName; in cluster mode else the first line of ipam.nodeNameFile (never the host
    // name: the store and `cluster gc` must know the node by its Node object's name); in pool
    // mode on one node else the host name.
    std::string node_name;
    // Whether node_name is the Node object's, from the config (ipam.nodeName; in cluster mode
    // also ipam.nodeNameFile), not the host name; and the node-name file to read it from
    // otherwise (ipam.nodeNameFile, else the one the install container writes).
    bool node_name_from_config = false;
    std::string node_name_file;
    std::optional<ClusterMode> cluster;
};

// The node's name as Kubernetes knows it, from the file the install container writes (Calico's
// /var/lib/calico/nodename convention): its first line, trimmed. Code 7 saying how to set it.
Expected<std::string> read_node_name_file(const std::string& path);

// nullopt without ipam.poolsDir. Code 7 for poolsDir beside ranges (one config, one mode), for
// ipam.etcd without poolsDir, and for a field of the wrong type or value, naming it.
Expected<std::optional<PoolMode>> parse_pool_mode(const nlohmann::json& doc,
                                                  const nlohmann::json& ipam);

// The block sizes of the mode: cluster mode cuts pools into Calico's (/26, /122) unless the
// config sets blockSize or blockSizeV6, since each block a node owns is one arena; the other
// modes keep what parse_state_knobs read.
void apply_block_size_defaults(const nlohmann::json& ipam, const std::optional<PoolMode>& pools,
                               engine::NetworkConfig& network);
// The same for a config known to be cluster mode (it has ipam.etcd).
void apply_cluster_block_sizes(const nlohmann::json& ipam, engine::NetworkConfig& network);

}  // namespace shmipam::ipam
