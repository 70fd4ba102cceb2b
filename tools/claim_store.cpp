#include "tools/claim_store.h"

#include <ctime>

#include "cluster/block_cache.h"
#include "cluster/etcd_config.h"
#include "cluster/fixed_claims.h"
#include "cluster/guarded_store.h"
#include "cluster/key_schema.h"
#include "cluster/pool_registry.h"
#include "tools/cluster_setup.h"

namespace shmipam::tools {

namespace {

Status refuse(ClaimPlan& plan, const std::string& why) {
    plan.status = ClaimPlan::Status::kConflict;
    plan.why = why;
    return Ok{};
}

}  // namespace

Status hold_in_cluster_store(const ClaimNetwork& net, ClaimPlan& plan, bool apply) {
    // A claim the node holds already is checked too: the store may have lost it (a node's
    // claims imported after the store was restored), and is then given it again.
    if (!net.cluster ||
        (plan.status != ClaimPlan::Status::kCreate && plan.status != ClaimPlan::Status::kPresent)) {
        return Ok{};
    }
    const std::string kind = "pool/";
    if (plan.state.compare(0, kind.size(), kind) != 0) {
        return make_error(Code::kInvalidConfig,
                          "cluster mode serves pools; " + plan.state + " is not one");
    }
    const std::string pool = plan.state.substr(kind.size());
    auto setup = read_setup(net.path, "", net.network.run_dir);
    if (!setup) return setup.error();
    const engine::IpAddress& address = plan.wanted.addresses.front();
    if (setup->fixed_pools.count(pool) == 0) {
        if (plan.status == ClaimPlan::Status::kPresent) return Ok{};  // the node's own
        auto cached =
            cluster::read_block_cache(cluster::block_cache_path(setup->state_dir(), pool));
        if (cached) {
            for (const auto& b : *cached) {
                if (b.cidr.address.family == address.family && b.cidr.contains(address)) {
                    return Ok{};
                }
            }
        }
        return refuse(plan, address.to_string() + " is in no block node " + setup->node +
                                " holds of pool " + pool +
                                " (its block cache): make the claim on the node owning its "
                                "block, or in a pool of fixedAddressPools");
    }
    auto cfg = cluster::etcd_config_from_json(setup->etcd);
    if (!cfg) return cfg.error();
    cluster::EtcdClient client(*cfg);
    const std::string prefix = cluster::etcd_prefix(setup->etcd);
    // The claim is written only into the store this node's claims are in: not another
    // cluster's, not one gone back in time (its claims may be missing from it), not another
    // layout. A dry run stamps nothing.
    cluster::Guards guards;
    guards.stamp_schema = apply;
    auto opened = cluster::GuardedStore::open(client, prefix, setup->state_dir(), guards);
    if (!opened) return opened.error();
    cluster::GuardedStore& store = *opened;
    cluster::FixedClaims claims(store, prefix);
    auto held = claims.get(pool, plan.key);
    if (!held) return held.error();
    if (*held && !((*held)->address == address)) {
        return refuse(plan, "the store's claim " + plan.key + " holds " +
                                (*held)->address.to_string() + " (node " + (*held)->node + ")");
    }
    if (*held && (*held)->node != setup->node) {
        return refuse(plan, "the store's claim " + plan.key + " is node " + (*held)->node +
                                "'s: the pod's next start takes it over with its address");
    }
    if (*held) return Ok{};
    // The node holds it and the store does not: the store's claim is (re)made, as a new one is.
    plan.status = ClaimPlan::Status::kCreate;
    auto record = store.get(cluster::keys::address(prefix, pool, address));
    if (!record) return record.error();
    if (*record) {
        return refuse(plan, address.to_string() + " is held in the store by " + (*record)->value);
    }
    if (!apply) return Ok{};
    const pools::IpPool* spec = net.catalog ? net.catalog->pool(pool) : nullptr;
    if (spec != nullptr) {
        if (auto st = cluster::register_pool(store, prefix, pool, spec->subnet, 0); !st) return st;
    }
    auto made = claims.restore(pool, plan.key, address, setup->node, plan.wanted.keep_idle,
                               uint64_t(std::time(nullptr)));
    if (!made) return made.error();
    if (made->outcome == cluster::FixedClaims::Restored::Outcome::kConflict) {
        return refuse(plan, made->why);
    }
    return Ok{};
}

}  // namespace shmipam::tools
