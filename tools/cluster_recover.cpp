#include "tools/cluster_recover.h"

#include <map>

#include "cluster/block_cache.h"
#include "cluster/block_store.h"
#include "cluster/cluster_identity.h"
#include "cluster/etcd_config.h"
#include "cluster/fixed_claims.h"
#include "cluster/node_files.h"
#include "cluster/revision_floor.h"
#include "engine/addr/fingerprint.h"
#include "engine/ops/allocator.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

using Outcome = RecoverRow::Outcome;

// One pool's cached blocks against the store's, under the pool lock (a helper of this node
// writes the cache under it; the node's helpers are refused meanwhile anyway, by the floor).
Status recover_blocks(const ClusterSetup& setup, cluster::BlockStore& store,
                      const std::vector<cluster::Block>& in_store, const std::string& pool,
                      uint64_t lock_wait_ms, bool apply, std::vector<RecoverRow>& rows) {
    const cluster::NodeFiles files{setup.state_dir(), setup.run_dir + "/_cluster"};
    auto lock = cluster::PoolLock::acquire(files.lock(pool), lock_wait_ms);
    if (!lock) return lock.error();
    auto cached = cluster::read_block_cache(files.block_cache(pool));
    if (!cached) {
        rows.push_back({pool, "blocks", Outcome::kCannot, cached.error().msg});
        return Ok{};
    }
    std::map<std::string, std::string> owner_of;
    for (const auto& b : in_store) owner_of[b.cidr.to_string()] = b.node;
    for (const auto& b : *cached) {
        const std::string name = b.cidr.to_string();
        RecoverRow row{pool, "block " + name, Outcome::kPresent, ""};
        const auto o = owner_of.find(name);
        if (o != owner_of.end()) {
            if (o->second != setup.node) {
                row.outcome = Outcome::kConflict;
                row.why = "the store gives it to node " + o->second;
            }
        } else if (!apply) {
            row.outcome = Outcome::kMissing;
        } else {
            // claim_holding on the block's own address creates exactly this block if it is
            // absent, answers it if it is this node's, and names the owner otherwise (a node
            // that claimed it since the store was read). The block stands in for the pool's
            // CIDR, which only bounds the address (the node's cache has the block alone).
            auto got =
                store.claim_holding(pool, b.cidr, b.cidr.prefix, b.cidr.network(), setup.node);
            if (got) {
                row.outcome = Outcome::kRecreated;
            } else if (got.error().code == Code::kRequestedAddressTaken) {
                row.outcome = Outcome::kConflict;
                row.why = got.error().msg;
            } else {
                return got.error();
            }
        }
        rows.push_back(std::move(row));
    }
    return Ok{};
}

// The fixed claims the node's state of `pool` holds (in use or idle: an idle one is served
// again to its pod here, so its address must not go to another node) against the store's.
Status recover_claims(const ClusterSetup& setup, cluster::FixedClaims& fixed,
                      const std::string& pool, uint64_t lock_wait_ms, bool apply,
                      std::vector<RecoverRow>& rows) {
    const cluster::NodeFiles files{setup.state_dir(), setup.run_dir + "/_cluster"};
    auto lock = cluster::PoolLock::acquire(files.lock(pool), lock_wait_ms);
    if (!lock) return lock.error();
    auto state = open_network(setup.run_dir, "pool/" + pool, shm::Access::kReadOnly);
    if (!state) return Ok{};  // no state of the pool on this node: nothing it holds
    engine::NetworkConfig none;
    const auto local = engine::Allocator(**state, none).claims();
    if (local.empty()) return Ok{};
    auto in_store = fixed.all(pool);
    if (!in_store) return in_store.error();
    for (const auto& c : local) {
        RecoverRow row{pool, "claim " + c.key + " (" + engine::addresses_text(c.addresses) + ")",
                       Outcome::kPresent, ""};
        // The state may hold the key cut to its entry's field: then it cannot be made again.
        if (engine::fingerprint(c.key, cluster::ifname_of_claim_key(c.key)) != c.fp) {
            row.outcome = Outcome::kCannot;
            row.why = "this node's state holds the claim key cut short; make it again by hand";
            rows.push_back(std::move(row));
            continue;
        }
        if (c.addresses.size() != 1) {
            row.outcome = Outcome::kCannot;
            row.why = "a fixed claim holds one address in the store; this one holds " +
                      std::to_string(c.addresses.size());
            rows.push_back(std::move(row));
            continue;
        }
        const engine::IpAddress& a = c.addresses.front();
        const cluster::FixedClaim* same_key = nullptr;
        const cluster::FixedClaim* same_address = nullptr;
        for (const auto& s : *in_store) {
            if (s.key == c.key) same_key = &s;
            if (s.address == a) same_address = &s;
        }
        if (same_key != nullptr) {
            if (same_key->node != setup.node || !(same_key->address == a)) {
                row.outcome = Outcome::kConflict;
                row.why = "the store gives claim " + c.key + " to node " + same_key->node + " on " +
                          same_key->address.to_string();
            }
        } else if (same_address != nullptr) {
            row.outcome = Outcome::kConflict;
            row.why = a.to_string() + " is held by claim " + same_address->key + " of node " +
                      same_address->node;
        } else if (!apply) {
            row.outcome = Outcome::kMissing;
        } else {
            const uint64_t idle_since =
                c.use == engine::ClaimView::Use::kInUse ? 0 : c.idle_since_unix_s;
            auto done = fixed.restore(pool, c.key, a, setup.node, c.keep_idle, idle_since);
            if (!done) return done.error();
            using R = cluster::FixedClaims::Restored::Outcome;
            row.outcome = done->outcome == R::kCreated   ? Outcome::kRecreated
                          : done->outcome == R::kPresent ? Outcome::kPresent
                                                         : Outcome::kConflict;
            row.why = done->why;
        }
        rows.push_back(std::move(row));
    }
    return Ok{};
}

}  // namespace

size_t RecoverReport::count(RecoverRow::Outcome o) const {
    size_t n = 0;
    for (const auto& r : rows) n += r.outcome == o;
    return n;
}

bool RecoverReport::work_left(bool applied) const {
    if (count(Outcome::kConflict) != 0 || count(Outcome::kCannot) != 0) return true;
    if (applied) return !accepted;
    return count(Outcome::kMissing) != 0 || floor_ahead || id_changed || !floor_problem.empty();
}

Expected<RecoverReport> recover_node(const ClusterSetup& setup, bool apply) {
    auto cfg = cluster::etcd_config_from_json(setup.etcd);
    if (!cfg) return cfg.error();
    // The store as it is: this verb is the way out of the revision guard, so it does not ask it.
    cluster::Guards guards{cluster::Guards::ClusterId::kIgnore};
    guards.check_revision_floor = false;
    auto view = read_store(setup, guards);
    if (!view) return view.error();
    cluster::KvStore& etcd = *view->store;
    const std::string dir = setup.state_dir();
    RecoverReport report;
    report.node = setup.node;
    const uint64_t cluster_id = etcd.last_header().cluster_id;
    report.store_revision = etcd.highest_revision();
    if (auto floor = cluster::remembered_revision(dir); floor) {
        report.remembered_revision = *floor;
        report.floor_ahead = *floor > etcd.highest_revision();
    } else {
        report.floor_problem = floor.error().msg;
    }
    report.id_changed = cluster::has_cluster_id(dir) && !cluster::check_cluster_id(dir, cluster_id);

    const uint64_t lock_wait_ms = cluster::kLockWaitBudgets * cfg->budget_ms;
    const std::string prefix = cluster::etcd_prefix(setup.etcd);
    cluster::BlockStore store(etcd, prefix);
    for (const auto& pool : cached_pools(dir)) {
        const auto b = view->blocks.find(pool);
        const std::vector<cluster::Block> none;
        if (auto st = recover_blocks(setup, store, b == view->blocks.end() ? none : b->second, pool,
                                     lock_wait_ms, apply, report.rows);
            !st) {
            return st.error();
        }
    }
    cluster::FixedClaims fixed(etcd, prefix);
    for (const auto& pool : setup.fixed_pools) {
        if (auto st = recover_claims(setup, fixed, pool, lock_wait_ms, apply, report.rows); !st) {
            return st.error();
        }
    }
    // Everything of the node is in the store again: the node accepts it. The floor is the
    // store's revision now (after the re-creations), so a later rebuild is caught again.
    const bool complete =
        report.count(Outcome::kConflict) == 0 && report.count(Outcome::kCannot) == 0;
    if (apply && complete) {
        if (auto st = cluster::replace_cluster_id(dir, cluster_id); !st) return st.error();
        if (auto st = cluster::reset_revision_floor(dir, etcd.highest_revision()); !st) {
            return st.error();
        }
        report.accepted = true;
        report.accepted_revision = etcd.highest_revision();
    }
    return report;
}

}  // namespace shmipam::tools
