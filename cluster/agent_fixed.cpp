// The agent's fixed-address ops (docs/cluster.md, "Fixed addresses across nodes"): take a fixed
// claim, give one up, give up those the node holds no more, read who holds one.
#include <unistd.h>

#include <ctime>
#include <optional>
#include <set>

#include "cluster/address_ranges.h"
#include "cluster/agent.h"
#include "cluster/fixed_claims.h"
#include "cluster/pool_registry.h"
#include "engine/addr/fingerprint.h"
#include "engine/ops/allocator.h"

namespace shmipam::cluster::agent {

namespace {

// What the pool state `pool_state` says of the local fixed claim (key, ifname), read now (after
// the store's claim was read): absent, or its use; kNoState when there is no state yet (nothing
// of it is in use here); kUnreadable when the state cannot be read, which both callers take as
// the claim being there and in use (an address left claimed is an operator's cleanup, one
// given twice an outage).
enum class LocalClaim { kAbsent, kIdle, kInUse, kNoState, kUnreadable };
LocalClaim local_claim(const std::string& pool_state, const std::string& key,
                       const std::string& ifname) {
    auto state = engine::NetworkStore::open_existing(pool_state, shm::Access::kReadOnly);
    if (!state) {
        return ::access(pool_state.c_str(), F_OK) == 0 ? LocalClaim::kUnreadable
                                                       : LocalClaim::kNoState;
    }
    engine::NetworkConfig cfg;
    const engine::Fingerprint fp = engine::fingerprint(key, ifname);
    for (const auto& c : engine::Allocator(**state, cfg).claims()) {
        if (c.fp != fp) continue;
        return c.use == engine::ClaimView::Use::kInUse ? LocalClaim::kInUse : LocalClaim::kIdle;
    }
    return LocalClaim::kAbsent;
}

// Whether this node holds the local fixed claim no more (FixedClaims::give_up asks it).
bool unheld_here(const std::string& pool_state, const std::string& key, const std::string& ifname) {
    if (pool_state.empty()) return true;  // a plugin that checked before asking
    return local_claim(pool_state, key, ifname) == LocalClaim::kAbsent;
}

// Whether a sandbox on this node uses the local fixed claim now.
bool in_use_here(const std::string& pool_state, const std::string& key, const std::string& ifname) {
    if (pool_state.empty()) return true;
    const LocalClaim c = local_claim(pool_state, key, ifname);
    return c == LocalClaim::kInUse || c == LocalClaim::kUnreadable;
}

}  // namespace

Expected<protocol::FixedAnswer> take_fixed(const Context& c, const protocol::TakeFixed& r) {
    // No usable address listed would make every claim unusable (and given up): refused.
    if (r.usable.empty()) {
        return make_error(Code::kInvalidConfig,
                          "the cluster helper's take-fixed request lists no usable address");
    }
    // A pool of fixed addresses is registered like any pool (never cut: block prefix 0), so that
    // no other pool's blocks or claims overlap its addresses.
    if (auto st = register_pool(c.store, c.store.prefix(), r.scope.pool, r.pool_cidr, 0); !st) {
        return st.error();
    }
    FixedClaims claims(c.store, c.store.prefix());
    std::string moved_from;
    // A requested address is taken when free and allocatable, and only then.
    const auto pick = [&](const std::set<std::string>& taken) -> std::optional<engine::IpAddress> {
        if (!r.address) return first_not_in(r.usable, taken);
        if (taken.count(r.address->to_string()) != 0 || !holds(r.usable, *r.address)) {
            return std::nullopt;
        }
        return r.address;
    };
    // A claim of this node no longer allocatable is replaced only when no sandbox here uses it.
    const auto keep = [&](const engine::IpAddress& a) {
        return holds(r.usable, a) || in_use_here(r.pool_state, r.claim_key, r.ifname);
    };
    auto got =
        claims.take(r.scope.pool, r.claim_key, r.scope.node, r.keep_idle, pick, &moved_from, keep);
    if (!got && r.address && got.error().code == Code::kNoAddressFree) {
        return make_error(Code::kRequestedAddressTaken,
                          "requested IP address " + r.address->to_string() + " of " + r.scope.pool +
                              " is held by another fixed claim");
    }
    if (!got) return got.error();
    return protocol::FixedAnswer{got->address, moved_from};
}

Expected<protocol::GiveUpAnswer> give_up_fixed(const Context& c, const protocol::GiveUpFixed& r) {
    FixedClaims claims(c.store, c.store.prefix());
    auto done = claims.give_up(r.scope.pool, r.claim_key, r.scope.node,
                               [&] { return unheld_here(r.pool_state, r.claim_key, r.ifname); });
    if (!done) return done.error();
    if (!*done && !r.pool_state.empty() &&
        local_claim(r.pool_state, r.claim_key, r.ifname) == LocalClaim::kIdle) {
        // Kept here, idle, by its policy: the store's claim says since when (read after the
        // local claim, so a take that made it in use again meanwhile is not undone: the mark
        // compares the revision read).
        auto held = claims.get(r.scope.pool, r.claim_key);
        if (!held) return held.error();
        if (*held && (*held)->node == r.scope.node) {
            auto marked = claims.mark_idle(r.scope.pool, **held, uint64_t(std::time(nullptr)));
            if (!marked) return marked.error();
        }
    }
    return protocol::GiveUpAnswer{*done};
}

Expected<protocol::GiveUpAnswer> give_up_unheld(const Context& c, const protocol::GiveUpUnheld& r) {
    FixedClaims claims(c.store, c.store.prefix());
    auto all = claims.all(r.scope.pool);
    if (!all) return all.error();
    protocol::GiveUpAnswer out;
    for (const auto& claim : *all) {
        if (claim.node != r.scope.node) continue;
        const std::string ifname = ifname_of_claim_key(claim.key);
        auto done = claims.give_up(r.scope.pool, claim.key, r.scope.node,
                                   [&] { return unheld_here(r.pool_state, claim.key, ifname); });
        if (!done) return done.error();
        out.released = out.released || *done;
    }
    return out;
}

Expected<protocol::FixedOwnerAnswer> read_fixed(const Context& c, const protocol::ReadFixed& r) {
    auto all = FixedClaims(c.store, c.store.prefix()).all(r.scope.pool);
    if (!all) return all.error();
    protocol::FixedOwnerAnswer out;
    for (const auto& claim : *all) {
        if (claim.key == r.claim_key) out = {claim.node, claim.address};
    }
    return out;
}

}  // namespace shmipam::cluster::agent
