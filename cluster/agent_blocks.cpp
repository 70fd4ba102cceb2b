// The agent's block ops: claim a block or refresh the node's block cache, and give a block back.
#include <optional>
#include <set>

#include "cluster/address_ranges.h"
#include "cluster/agent.h"
#include "cluster/block_cache.h"
#include "cluster/block_release.h"
#include "cluster/block_store.h"
#include "cluster/waiting.h"

namespace shmipam::cluster::agent {

namespace {

// The pool has no block left for this node: it records that it waits, and the answer names the
// nodes whose idle blocks it waits for (their node pass gives one back), or, when no block is
// idle, the nodes holding the pool's blocks.
Status note_waiting(const Context& c, Waiting& waiting, const std::vector<Block>& owned,
                    const protocol::BlockGeometry& g, protocol::BlockAnswer& out) {
    if (auto st = waiting.mark_waiting(c.scope.pool, c.scope.node, g.usable); !st) return st;
    auto idle = waiting.idle(c.scope.pool);
    if (!idle) return idle.error();
    std::set<std::string> idle_nodes, holders;
    for (const auto& b : owned) {
        holders.insert(b.node);
        for (const auto& i : *idle) {
            // Only a record that still names the block's owner (one left from an earlier owner
            // says nothing).
            if (i.block.to_string() == b.cidr.to_string() && i.node == b.node &&
                b.node != c.scope.node) {
                idle_nodes.insert(b.node);
            }
        }
    }
    out.waiting_for.assign(idle_nodes.begin(), idle_nodes.end());
    out.holders.assign(holders.begin(), holders.end());
    return Ok{};
}

}  // namespace

Expected<protocol::BlockAnswer> claim_or_refresh(const Context& c, const protocol::BlockGeometry& g,
                                                 const protocol::ClaimBlock* claim) {
    const protocol::Scope& s = c.scope;
    BlockStore store(c.store, c.store.prefix());
    Waiting waiting(c.store, c.store.prefix());
    auto owned = store.blocks(s.pool);
    if (!owned) return owned.error();
    if (auto st = store.check_geometry(s.pool, g.pool_cidr, g.block_prefix); !st) {
        return st.error();
    }
    const auto worth = [&](const engine::Cidr& b) { return serves(g.usable, b); };
    auto cache = read_block_cache(c.files.block_cache(s.pool));
    if (!cache) return cache.error();
    protocol::BlockAnswer out;
    // A block of this node the caller did not know of (another ADD's agent claimed it while
    // this one waited for the lock, or an agent died after claiming it): that one first.
    std::set<std::string> seen;
    for (const auto& b : g.seen) seen.insert(b.to_string());
    std::optional<engine::Cidr> unseen;
    for (const Block& b : *owned) {
        if (b.node == s.node && seen.count(b.cidr.to_string()) == 0 && worth(b.cidr)) {
            unseen = b.cidr;
        }
    }
    if (claim == nullptr) {
        // Refresh: only the cache brought in line with the store, below.
    } else if (claim->address) {
        auto b = store.claim_holding(s.pool, g.pool_cidr, g.block_prefix, *claim->address, s.node,
                                     claim->max_blocks);
        if (!b) return b.error();
        out.claimed = b->cidr;
    } else if (unseen) {
        out.claimed = unseen;
    } else {
        auto b = store.claim_next(s.pool, g.pool_cidr, g.block_prefix, s.node, claim->max_blocks,
                                  &out.at_cap, worth);
        if (!b) return b.error();
        if (*b) out.claimed = (*b)->cidr;
        // Nothing to claim: ADDs stop starting agents ahead of need for a while.
        if (!*b) touch(c.files.ahead_none(s.pool));
        if (!*b && !out.at_cap && !claim->ahead) {
            if (auto st = note_waiting(c, waiting, *owned, g, out); !st) return st.error();
        } else if (*b) {
            (void)waiting.clear_waiting(s.pool, s.node);  // a stale record only ages out
        }
    }
    // The node's blocks of the pool, as the store says now (if it cannot say, what the cache
    // had plus what was just claimed: a claimed block is never left out of the cache).
    auto now = store.blocks(s.pool);
    if (!now) {
        if (out.claimed) {
            std::vector<OwnedBlock> kept = *cache;
            kept.push_back({*out.claimed, 0});
            (void)write_block_cache(c.files.block_cache(s.pool), kept);
        }
        return now.error();
    }
    std::vector<OwnedBlock> mine;
    for (const Block& b : *now) {
        if (b.node != s.node) continue;
        mine.push_back({b.cidr, b.mod_revision});
        out.blocks.push_back(b.cidr);
    }
    if (auto st = write_block_cache(c.files.block_cache(s.pool), mine); !st) return st.error();
    return out;
}

Expected<protocol::ReleaseAnswer> release(const Context& c, const protocol::ReleaseBlock& r) {
    BlockStore store(c.store, c.store.prefix());
    auto owned = store.blocks(r.scope.pool);
    if (!owned) return owned.error();
    auto out = release_block(r, store, *owned);
    if (!out) return out.error();
    // The block's idle record goes with it (a later owner's pass records its own).
    if (out->released) (void)Waiting(c.store, c.store.prefix()).clear_idle(r.scope.pool, r.block);
    return out;
}

}  // namespace shmipam::cluster::agent
