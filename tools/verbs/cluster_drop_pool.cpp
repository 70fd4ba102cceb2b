// shmipamctl cluster drop-pool (docs/cluster.md, "Changing a pool's CIDR or block size"): a
// pool's registration and what is left of it removed from the store, so that the pool can come
// back with another CIDR or block size, or its CIDR go to another pool. Refused while a block or
// fixed claim of the pool is left (the nodes give their blocks back once the pool is removed
// from their pool files; `cluster gc` those of nodes gone), unless --force.
#include <iostream>
#include <map>

#include "cluster/block_store.h"
#include "cluster/etcd_config.h"
#include "cluster/fixed_claims.h"
#include "cluster/guarded_store.h"
#include "cluster/key_schema.h"
#include "cluster/pool_registry.h"
#include "tools/cluster_setup.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

int cmd_cluster_drop_pool(const CommonOptions& common, const ClusterDropPoolOptions& o) {
    if (o.pool.empty() || o.pool.find('/') != std::string::npos) {
        return cannot_read("--pool " + o.pool + ": give the pool's name");
    }
    auto setup = read_setup(o.config, "", common.run_dir);
    if (!setup) return cannot_read(setup.error());
    auto cfg = cluster::etcd_config_from_json(setup->etcd);
    if (!cfg) return cannot_read(cfg.error());
    cluster::EtcdClient client(*cfg);
    const std::string prefix = cluster::etcd_prefix(setup->etcd);
    auto opened = cluster::GuardedStore::open(client, prefix, setup->state_dir(), {});
    if (!opened) return cannot_read(opened.error());
    cluster::GuardedStore& store = *opened;

    auto meta = store.get(cluster::keys::meta(prefix, o.pool));
    if (!meta) return cannot_read(meta.error());
    std::optional<cluster::KeyValue> record;
    std::string cidr = "no registration";
    if (*meta) {
        if (auto m = cluster::parse_meta(o.pool, (*meta)->value)) {
            cidr = m->cidr.to_string();
            auto r = store.get(cluster::keys::cidr(prefix, m->cidr));
            if (!r) return cannot_read(r.error());
            // Only a record that names this pool goes with it.
            if (*r && cluster::pool_of_record(**r) == o.pool) record = **r;
        }
    }
    auto blocks = store.get_prefix(cluster::keys::blocks(prefix, o.pool));
    if (!blocks) return cannot_read(blocks.error());
    auto claims = store.get_prefix(cluster::keys::claims(prefix, o.pool));
    if (!claims) return cannot_read(claims.error());
    auto rest = store.any_under(cluster::keys::pool_root(prefix, o.pool));
    if (!rest) return cannot_read(rest.error());
    if (!*meta && !*rest) {
        std::cout << "pool " << o.pool << " is not in the cluster store: nothing to do\n";
        return kExitClean;
    }
    std::map<std::string, size_t> held_by;  // node -> blocks and claims
    for (const auto& kv : *blocks) {
        auto b = cluster::BlockStore::parse(kv, std::nullopt);
        ++held_by[b ? b->node : "(unreadable)"];
    }
    for (const auto& kv : *claims) {
        const auto k = cluster::keys::split(prefix, kv.key, cluster::keys::kClaims);
        auto c = k ? cluster::parse_fixed_claim(k->rest, kv) : std::nullopt;
        ++held_by[c ? c->node : "(unreadable)"];
    }
    std::string holders;
    for (const auto& [node, n] : held_by) {
        holders += (holders.empty() ? "" : ", ") + node + ": " + std::to_string(n);
    }
    const std::string what = "pool " + o.pool + " (" + cidr + "), " +
                             std::to_string(blocks->size()) + " blocks and " +
                             std::to_string(claims->size()) + " fixed claims";
    if (!held_by.empty() && !o.force) {
        std::cout << "refusing to drop " << what << " left (" << holders
                  << "): remove the pool from every node's poolsDir and let its pods go; each "
                     "node's pass (shmipamctl cluster pass) gives back its empty blocks, "
                     "`cluster gc` those of nodes gone; --force drops them anyway (only when "
                     "no node uses an address of the pool)\n";
        return kExitViolations;
    }
    if (!o.apply) {
        std::cout << "would drop " << what << " (dry run; --apply to act)\n";
        return kExitViolations;
    }
    if (!held_by.empty()) {
        auto gone = store.txn({}, {{cluster::keys::blocks(prefix, o.pool), std::nullopt, true},
                                   {cluster::keys::claims(prefix, o.pool), std::nullopt, true}});
        if (!gone) return cannot_read(gone.error());
    }
    auto dropped = cluster::drop_pool(store, prefix, o.pool, *meta, record);
    if (!dropped) return cannot_read(dropped.error());
    if (!*dropped) {
        std::cout << "pool " << o.pool
                  << " changed while being dropped (a node claimed in it): nothing dropped; "
                     "run again\n";
        return kExitViolations;
    }
    std::cout << "dropped " << what << "\n";
    return kExitClean;
}

}  // namespace shmipam::tools
