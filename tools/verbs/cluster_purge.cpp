// shmipamctl cluster purge (docs/operations.md, "Removing shmipam from a cluster"): every key
// shmipam keeps under the config's etcd prefix removed, in one range delete. Refused while a
// block or fixed claim names a node in --live-nodes (its pods may still use those addresses,
// and its plugin would claim again), unless --force; a dry run unless --confirm repeats the
// prefix. Each node's own files go with `shmipamctl uninstall --purge`.
#include <iostream>
#include <map>

#include "cluster/block_store.h"
#include "cluster/etcd_config.h"
#include "cluster/fixed_claims.h"
#include "tools/cluster_setup.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

int cmd_cluster_purge(const CommonOptions& common, const ClusterPurgeOptions& o) {
    auto setup = read_setup(o.config, "", common.run_dir);
    if (!setup) return cannot_read(setup.error());
    const std::string prefix = cluster::etcd_prefix(setup->etcd);
    // A prefix that is empty or the root would name every key of the etcd cluster.
    if (prefix.size() < 2 || prefix.front() != '/' || prefix.back() == '/') {
        return cannot_read("ipam.etcd.prefix \"" + prefix +
                           "\" is not a prefix of shmipam's own (like /shmipam): refusing to "
                           "delete under it");
    }
    if (!o.confirm.empty() && o.confirm != prefix) {
        return cannot_read("--confirm " + o.confirm + " is not the config's prefix " + prefix +
                           ": nothing removed");
    }
    auto live = read_live_nodes(o.live_nodes);
    if (!live) return cannot_read(live.error());
    auto cfg = cluster::etcd_config_from_json(setup->etcd);
    if (!cfg) return cannot_read(cfg.error());
    cluster::EtcdClient etcd(*cfg);
    auto blocks = cluster::BlockStore(etcd, prefix).all_blocks();
    if (!blocks) return cannot_read(blocks.error());
    auto claims = cluster::FixedClaims(etcd, prefix).everywhere();
    if (!claims) return cannot_read(claims.error());
    auto keys = etcd.get_prefix(prefix + "/");
    if (!keys) return cannot_read(keys.error());
    std::map<std::string, size_t> live_held;  // node in the list -> its blocks and claims
    size_t block_count = 0;
    for (const auto& [pool, of_pool] : *blocks) {
        block_count += of_pool.size();
        for (const auto& b : of_pool) {
            if (live->count(b.node) != 0) ++live_held[b.node];
        }
    }
    for (const auto& [pool, c] : *claims) {
        if (live->count(c.node) != 0) ++live_held[c.node];
    }
    const std::string what = std::to_string(keys->size()) + " keys under " + prefix + "/ (" +
                             std::to_string(block_count) + " blocks, " +
                             std::to_string(claims->size()) + " fixed claims)";
    if (!live_held.empty() && !o.force) {
        std::string held;
        for (const auto& [node, n] : live_held) {
            held += (held.empty() ? "" : ", ") + node + ": " + std::to_string(n);
        }
        std::cout << "refusing to purge " << what << ": nodes in --live-nodes still hold blocks "
                  << "or fixed claims (" << held
                  << "); uninstall shmipam from them first (their pods may use those addresses, "
                     "and their plugin would claim again), or --force\n";
        return kExitViolations;
    }
    if (o.confirm.empty()) {
        std::cout << "would remove " << what << " (dry run; --confirm " << prefix << " to act)\n";
        return keys->empty() ? kExitClean : kExitViolations;
    }
    auto done = etcd.txn({}, {{prefix + "/", std::nullopt, true}});
    if (!done) return cannot_read(done.error());
    std::cout << "removed " << what << "\n";
    return kExitClean;
}

}  // namespace shmipam::tools
