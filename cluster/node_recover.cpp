#include "cluster/node_recover.h"

#include <map>

#include "cluster/block_cache.h"
#include "cluster/block_store.h"
#include "cluster/cluster_identity.h"
#include "cluster/fixed_claims.h"
#include "cluster/key_schema.h"
#include "cluster/revision_floor.h"
#include "engine/addr/fingerprint.h"

namespace shmipam::cluster {

namespace {

using Outcome = RecoverRow::Outcome;

// One pool's cached blocks against the store's, under the pool lock (a helper of this node
// writes the cache under it; the node's helpers are refused meanwhile anyway, by the floor).
Status recover_blocks(const RecoverNode& n, BlockStore& store, const std::vector<Block>& in_store,
                      const std::string& pool, bool apply, std::vector<RecoverRow>& rows) {
    auto lock = PoolLock::acquire(n.files.lock(pool), n.lock_wait_ms);
    if (!lock) return lock.error();
    auto cached = read_block_cache(n.files.block_cache(pool));
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
            if (o->second != n.node) {
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
            auto got = store.claim_holding(pool, b.cidr, b.cidr.prefix, b.cidr.network(), n.node);
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
Status recover_claims(const RecoverNode& n, FixedClaims& fixed, NodeSide& side,
                      const std::string& pool, bool apply, std::vector<RecoverRow>& rows) {
    auto lock = PoolLock::acquire(n.files.lock(pool), n.lock_wait_ms);
    if (!lock) return lock.error();
    const std::vector<engine::ClaimView> local = side.claims_held(pool);
    if (local.empty()) return Ok{};
    auto in_store = fixed.all(pool);
    if (!in_store) return in_store.error();
    for (const auto& c : local) {
        RecoverRow row{pool, "claim " + c.key + " (" + engine::addresses_text(c.addresses) + ")",
                       Outcome::kPresent, ""};
        // The state may hold the key cut to its entry's field: then it cannot be made again.
        if (engine::fingerprint(c.key, ifname_of_claim_key(c.key)) != c.fp) {
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
        const FixedClaim* same_key = nullptr;
        const FixedClaim* same_address = nullptr;
        for (const auto& s : *in_store) {
            if (s.key == c.key) same_key = &s;
            if (s.address == a) same_address = &s;
        }
        if (same_key != nullptr) {
            if (same_key->node != n.node || !(same_key->address == a)) {
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
            auto done = fixed.restore(pool, c.key, a, n.node, c.keep_idle, idle_since);
            if (!done) return done.error();
            using R = FixedClaims::Restored::Outcome;
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

Expected<RecoverReport> recover_node(GuardedStore& store, const RecoverNode& n, NodeSide& side,
                                     bool apply) {
    const std::string& prefix = store.prefix();
    const std::string& dir = n.files.state_dir;
    // One read of every pool's keys: the blocks compared come from it.
    auto kvs = store.get_prefix(keys::pools(prefix));
    if (!kvs) return kvs.error();
    const auto blocks = BlockStore::blocks_by_pool(prefix, *kvs);
    RecoverReport report;
    report.node = n.node;
    const uint64_t cluster_id = store.last_header().cluster_id;
    report.store_revision = store.highest_revision();
    if (auto floor = remembered_revision(dir); floor) {
        report.remembered_revision = *floor;
        report.floor_ahead = *floor > store.highest_revision();
    } else {
        report.floor_problem = floor.error().msg;
    }
    report.id_changed = has_cluster_id(dir) && !check_cluster_id(dir, cluster_id);

    BlockStore block_store(store, prefix);
    const std::vector<Block> none;
    for (const auto& pool : cached_pools(dir)) {
        const auto b = blocks.find(pool);
        if (auto st = recover_blocks(n, block_store, b == blocks.end() ? none : b->second, pool,
                                     apply, report.rows);
            !st) {
            return st.error();
        }
    }
    FixedClaims fixed(store, prefix);
    for (const auto& pool : n.fixed_pools) {
        if (auto st = recover_claims(n, fixed, side, pool, apply, report.rows); !st) {
            return st.error();
        }
    }
    // Everything of the node is in the store again: the node accepts it. The floor is the
    // store's revision now (after the re-creations), so a later rebuild is caught again.
    const bool complete =
        report.count(Outcome::kConflict) == 0 && report.count(Outcome::kCannot) == 0;
    if (apply && complete) {
        if (auto st = replace_cluster_id(dir, cluster_id); !st) return st.error();
        if (auto st = reset_revision_floor(dir, store.highest_revision()); !st) {
            return st.error();
        }
        report.accepted = true;
        report.accepted_revision = store.highest_revision();
    }
    return report;
}

}  // namespace shmipam::cluster
