#include "cluster/node_pass.h"

#include <map>
#include <set>

#include "cluster/block_cache.h"
#include "cluster/fixed_claims.h"
#include "engine/addr/fingerprint.h"

namespace shmipam::cluster {

Expected<std::vector<PassRow>> pass_pool(GuardedStore& kv, const PassNode& n, NodeSide& side,
                                         const std::string& pool, bool configured) {
    auto lock = PoolLock::acquire(n.files.lock(pool), n.lock_wait_ms);
    if (!lock) return lock.error();
    BlockStore store(kv, kv.prefix());
    Waiting waiting(kv, kv.prefix());
    auto cached = read_block_cache(n.files.block_cache(pool));
    if (!cached) return cached.error();
    auto in_store = store.blocks(pool);
    if (!in_store) return in_store.error();
    std::vector<OwnedBlock> mine;
    std::map<std::string, std::string> owner_of;
    for (const auto& b : *in_store) {
        owner_of[b.cidr.to_string()] = b.node;
        if (b.node == n.node) mine.push_back({b.cidr, b.mod_revision});
    }
    std::vector<PassRow> rows;
    std::set<std::string> had;
    for (const auto& b : *cached) had.insert(b.cidr.to_string());
    for (const auto& b : mine) {
        if (had.count(b.cidr.to_string()) == 0) {
            rows.push_back({pool, b.cidr.to_string(), PassRow::Action::kAdopted});
        }
    }
    std::optional<PoolUse> use;
    for (const auto& b : *cached) {
        const auto o = owner_of.find(b.cidr.to_string());
        if (o != owner_of.end() && o->second == n.node) continue;
        if (!use) use = side.pool_use(pool, b.cidr.prefix);
        const auto u = use->blocks.find(b.cidr.to_string());
        rows.push_back({pool, b.cidr.to_string(), PassRow::Action::kDropped,
                        u == use->blocks.end() ? 0 : u->second.in_use,
                        o == owner_of.end() ? "" : o->second});
    }
    if (!rows.empty()) {
        if (auto st = write_block_cache(n.files.block_cache(pool), mine); !st) return st.error();
    }
    if (!configured) {
        auto given = give_back_withdrawn(store, waiting, n, side, pool, *in_store);
        if (!given) return given.error();
        rows.insert(rows.end(), given->begin(), given->end());
        return rows;
    }
    auto given = give_back_for_waiters(store, waiting, n, side, pool, *in_store);
    if (!given) return given.error();
    if (*given) rows.push_back(std::move(**given));
    return rows;
}

Expected<std::vector<PassRow>> moved_claims(KvStore& store, const std::string& prefix,
                                            const std::string& node, NodeSide& side,
                                            const std::string& pool) {
    std::vector<PassRow> out;
    const std::vector<engine::ClaimView> in_use = side.claims_in_use(pool);
    if (in_use.empty()) return out;
    auto claims = FixedClaims(store, prefix).all(pool);
    if (!claims) return claims.error();
    for (const auto& local : in_use) {
        const FixedClaim* found = nullptr;
        for (const auto& c : *claims) {
            if (engine::fingerprint(c.key, ifname_of_claim_key(c.key)) == local.fp) found = &c;
        }
        // The store's key is whole; the node's may be cut to its entry's field.
        const std::string& key = found != nullptr ? found->key : local.key;
        PassRow row{pool, "claim " + key + " (" + engine::addresses_text(local.addresses) + ")",
                    PassRow::Action::kMoved};
        row.container = local.container_id;
        if (found == nullptr) {
            row.why = "the store holds no such claim (given up or deleted)";
        } else if (found->node != node) {
            row.owner = found->node;
            row.why = "node " + found->node + " holds it now";
        } else {
            bool same = false;
            for (const auto& a : local.addresses) same = same || a == found->address;
            if (same) continue;
            row.owner = found->node;
            row.why = "the store's claim holds " + found->address.to_string() + " now (made again)";
        }
        out.push_back(std::move(row));
    }
    return out;
}

}  // namespace shmipam::cluster
