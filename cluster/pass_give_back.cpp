// The node pass's give-backs (cluster/node_pass.h): to waiting nodes, and a withdrawn pool's.
#include <algorithm>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cluster/block_release.h"
#include "cluster/give_back_rule.h"
#include "cluster/node_pass.h"
#include "cluster/pool_snapshot.h"

namespace shmipam::cluster {

namespace {

// This node's blocks of the pool with no address in use, each with the second from which it has
// had none, after the store's idle records were brought in line: recorded when first seen idle,
// restarted when the block was used since its record (its arena's last release is later),
// cleared when one is in use again. While what the node uses cannot be told (PoolUse::kUnknown)
// no block is idle. A block is given back only by a pass after the one that recorded it: the
// record is what tells a waiting node whose pass to wait for (its ADD's 11 names the holders).
struct IdleHere {
    const Block* block;
    uint64_t since_unix_s;
    bool recorded_before;  // by an earlier pass
};
Expected<std::vector<IdleHere>> record_idle(const PassNode& n, Waiting& waiting,
                                            const std::string& pool, const PoolUse& use,
                                            const std::vector<const Block*>& mine) {
    auto idle = waiting.idle(pool);
    if (!idle) return idle.error();
    std::map<std::string, uint64_t> recorded;  // this node's records: block -> since
    for (const auto& i : *idle) {
        if (i.node == n.node) recorded[i.block.to_string()] = i.since_unix_s;
    }
    std::vector<IdleHere> out;
    for (const Block* m : mine) {
        const std::string key = m->cidr.to_string();
        const auto u = use.blocks.find(key);
        const bool in_use = use.found == PoolUse::Found::kUnknown ||
                            (u != use.blocks.end() && u->second.in_use != 0);
        const auto r = recorded.find(key);
        if (in_use) {
            if (r != recorded.end()) {
                if (auto st = waiting.clear_idle(pool, m->cidr); !st) return st.error();
            }
            continue;
        }
        const uint64_t since = std::max(
            m->claimed_unix_s, u != use.blocks.end() ? u->second.last_release_unix_s : uint64_t{0});
        if (r == recorded.end() || r->second < since) {
            if (auto st = waiting.mark_idle(pool, m->cidr, n.node, since); !st) {
                return st.error();
            }
            out.push_back({m, since, r != recorded.end()});
        } else {
            out.push_back({m, r->second, true});
        }
    }
    return out;
}

// Gives `block` of the node's pool back, even its last, through the helper's release (the block
// held whole in its arena first), or the release of a block of a pool with no state here.
// nullopt when it cannot be held (a SpiderIPPool and a subnet of one name: the hold covers one
// arena only).
Expected<std::optional<protocol::ReleaseAnswer>> give_back_one(
    BlockStore& store, const PassNode& n, NodeSide& side, const std::string& pool,
    const PoolUse& use, const engine::Cidr& block, uint64_t min_age_s) {
    using Answer = std::optional<protocol::ReleaseAnswer>;
    if (use.found != PoolUse::Found::kNone && use.arenas.size() != 1) return Answer{};
    auto owned = store.blocks(pool);
    if (!owned) return owned.error();
    const protocol::ReleaseBlock req{{nlohmann::json::object(), pool, n.node, n.files.state_dir},
                                     block,
                                     use.arenas.empty() ? "" : use.arenas.front(),
                                     min_age_s,
                                     /*even_last=*/true};
    auto released =
        use.found == PoolUse::Found::kNone
            ? release_unused_block(req, store, *owned, [&] { return side.has_pool_state(pool); })
            : release_block(req, store, *owned);
    if (!released) return released.error();
    return Answer{*released};
}

}  // namespace

Expected<std::optional<PassRow>> give_back_for_waiters(BlockStore& store, Waiting& waiting,
                                                       const PassNode& n, NodeSide& side,
                                                       const std::string& pool,
                                                       const std::vector<Block>& in_store) {
    std::vector<const Block*> mine;
    for (const auto& b : in_store) {
        if (b.node == n.node) mine.push_back(&b);
    }
    if (mine.empty()) return std::optional<PassRow>{};
    const PoolUse use = side.pool_use(pool, mine.front()->cidr.prefix);
    auto idle_here = record_idle(n, waiting, pool, use, mine);
    if (!idle_here) return idle_here.error();
    const uint64_t now = uint64_t(std::time(nullptr));
    const auto old_enough = [&](uint64_t since) { return since + n.block_min_age_s <= now; };
    std::vector<IdleHere> candidates;
    for (const auto& i : *idle_here) {
        if (i.recorded_before && old_enough(i.since_unix_s)) candidates.push_back(i);
    }
    if (candidates.empty()) return std::optional<PassRow>{};

    // The rule decides on one read of the pool (cluster/pool_snapshot.h), taken after this
    // node's records were brought in line.
    auto snap = read_pool_snapshot(store.kv(), store.prefix(), pool, now);
    if (!snap) return snap.error();
    std::set<std::string> claimed;
    std::map<std::string, std::string> owner_of;
    std::map<std::string, uint64_t> last_claim_of;  // node -> when it last claimed a block
    for (const auto& b : snap->blocks) {
        claimed.insert(b.cidr.to_string());
        owner_of[b.cidr.to_string()] = b.node;
        last_claim_of[b.node] = std::max(last_claim_of[b.node], b.claimed_unix_s);
    }
    std::vector<Waiter> others;
    std::set<std::string> waiting_nodes;
    for (auto& w : snap->waiters) {
        // A waiter that claimed a block since its last try has been served (its record is
        // cleared just after the claim): both times are its own clock's.
        if (w.node == n.node || last_claim_of[w.node] >= w.last_unix_s) continue;
        waiting_nodes.insert(w.node);
        others.push_back(std::move(w));
    }
    if (others.empty()) return std::optional<PassRow>{};
    // Rule 1: the waiters an unclaimed block serves need no give-back.
    std::vector<std::set<std::string>> free_per_waiter;
    for (const auto& w : others) {
        free_per_waiter.push_back(snap->geometry ? free_blocks_for(w, snap->geometry->pool_cidr,
                                                                   snap->geometry->block_prefix,
                                                                   claimed, others.size())
                                                 : std::set<std::string>{});
    }
    const size_t unserved = waiters_unserved(free_per_waiter);
    if (unserved == 0) return std::optional<PassRow>{};
    // Rule 2: the first idle holders by name, one per waiter unserved. A record counts only
    // while the same read gives its block to its node: a block given back leaves the holders
    // in the read that sees it unclaimed.
    std::set<std::string> holders;
    for (const auto& r : snap->idle) {
        const auto o = owner_of.find(r.block.to_string());
        if (o != owner_of.end() && o->second == r.node && old_enough(r.since_unix_s) &&
            waiting_nodes.count(r.node) == 0) {
            holders.insert(r.node);
        }
    }
    if (!gives_back(n.node, holders, unserved)) return std::optional<PassRow>{};
    // The longest idle first.
    std::sort(candidates.begin(), candidates.end(),
              [](const IdleHere& a, const IdleHere& b) { return a.since_unix_s < b.since_unix_s; });
    const std::vector<std::string> names(waiting_nodes.begin(), waiting_nodes.end());
    for (const auto& c : candidates) {
        auto released = give_back_one(store, n, side, pool, use, c.block->cidr, n.block_min_age_s);
        if (!released) return released.error();
        if (!*released || !(*released)->released) continue;
        if (auto st = waiting.clear_idle(pool, c.block->cidr); !st) return st.error();
        return std::optional<PassRow>{
            PassRow{pool, c.block->cidr.to_string(), PassRow::Action::kGaveBack, 0, "", names}};
    }
    return std::optional<PassRow>{};
}

Expected<std::vector<PassRow>> give_back_withdrawn(BlockStore& store, Waiting& waiting,
                                                   const PassNode& n, NodeSide& side,
                                                   const std::string& pool,
                                                   const std::vector<Block>& in_store) {
    std::vector<PassRow> out;
    std::vector<const Block*> mine;
    for (const auto& b : in_store) {
        if (b.node == n.node) mine.push_back(&b);
    }
    if (mine.empty()) return out;
    const PoolUse use = side.pool_use(pool, mine.front()->cidr.prefix);
    for (const Block* b : mine) {
        // No minimum age: no ADD claims in a pool that is not configured; the release still
        // holds the block's every slot first, so an ADD of a pool file put back meanwhile
        // cannot take an address in it.
        auto released = give_back_one(store, n, side, pool, use, b->cidr, /*min_age_s=*/0);
        if (!released) return released.error();
        if (!*released || !(*released)->released) continue;  // in use or cooling: kept
        if (auto st = waiting.clear_idle(pool, b->cidr); !st) return st.error();
        PassRow row{pool, b->cidr.to_string(), PassRow::Action::kGaveBack};
        row.why = "its pool is no longer configured on this node";
        out.push_back(std::move(row));
    }
    return out;
}

}  // namespace shmipam::cluster
