// The answers of `shmipamctl cluster ls` and `cluster gc` (docs/cluster.md, "Operating it"):
// blocks per pool and node as the cluster store says, beside this node's cache and arenas, with
// the disagreements named; and the blocks a gc released (or would).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cluster/cluster_gc.h"
#include "cluster/node_pass.h"

namespace shmipam::tools {

struct ClusterBlockRow {
    std::string pool;
    std::string block;                  // CIDR
    std::string owner;                  // the store's node; empty: no node owns it
    bool cached = false;                // in this node's block cache
    std::optional<uint64_t> local_use;  // addresses in use in this node's arena, if it has one
    std::string problem;                // empty when the store, cache and arena agree
};

// What `cluster ls` reports beside the blocks: nodes waiting for a block, idle blocks, fixed claims
// whose pod's sandbox runs on another node while one here still uses them, and store values
// that are not what they should be.
struct ClusterLsNotes {
    struct Waiting {
        std::string pool, node;
        uint64_t seconds_ago = 0;
    };
    struct Idle {
        std::string pool, block, node;
        uint64_t idle_s = 0;
    };
    struct Moved {
        std::string pool, claim, owner, container;
        std::string why;  // how the store's claim differs from what the sandbox holds
    };
    std::vector<Waiting> waiting;
    std::vector<Idle> idle;
    std::vector<Moved> moved;
    std::vector<std::string> unreadable;  // keys
};

nlohmann::json cluster_ls_json(const std::string& node, const std::vector<ClusterBlockRow>& rows,
                               const ClusterLsNotes& notes);
std::string cluster_ls_text(const std::string& node, const std::vector<ClusterBlockRow>& rows,
                            const ClusterLsNotes& notes);

using GcBlockRow = cluster::GcRow;  // one block or fixed claim a gc gave back or kept

using PassRow = cluster::PassRow;  // one thing the node pass did or found
nlohmann::json cluster_pass_json(const std::string& node, const std::vector<PassRow>& rows);
std::string cluster_pass_text(const std::string& node, const std::vector<PassRow>& rows);
// Prometheus text: per pool, the fixed claims that moved to another node while a sandbox here
// uses them, the addresses in use here in blocks the store gives another node (or none), and
// whether the pass failed on the pool; and when the last pass ran.
std::string cluster_pass_metrics(const std::string& node, const std::vector<PassRow>& rows,
                                 const std::vector<std::string>& pools, uint64_t now_unix_s);

nlohmann::json cluster_gc_json(const std::vector<GcBlockRow>& rows, bool applied);
std::string cluster_gc_text(const std::vector<GcBlockRow>& rows, bool applied);

}  // namespace shmipam::tools
