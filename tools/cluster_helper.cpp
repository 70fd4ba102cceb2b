// shmipam-cluster: the cluster helper (docs/cluster.md). The plugin links no etcd client (a
// static libcurl with OpenSSL would cost every exec); on the rare path that needs the cluster
// store it execs this helper with one request on stdin (cluster/helper_protocol.h: claim a
// block, refresh the node's block cache, take or give up a fixed claim, release a block),
// which works under the node's pool lock and answers on stdout: the op's answer and exit 0, or
// an error {"code", "msg", "details"} and exit 1, which the plugin passes on.
#include <fcntl.h>
#include <unistd.h>

#include <ctime>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "base/build_version.h"
#include "cluster/block_cache.h"
#include "cluster/block_store.h"
#include "cluster/cluster_identity.h"
#include "cluster/etcd_config.h"
#include "cluster/fixed_claims.h"
#include "cluster/helper_protocol.h"
#include "cluster/node_files.h"
#include "cluster/pool_registry.h"
#include "cluster/revision_floor.h"
#include "cluster/store_schema.h"
#include "cluster/waiting.h"
#include "engine/addr/fingerprint.h"
#include "engine/ops/allocator.h"
#include "pools/ip_set.h"
#include "tools/cluster_release.h"

using nlohmann::json;
using namespace shmipam;
namespace protocol = cluster::protocol;

namespace {

// One run of the helper: the request's scope, the node's files, and where it says that etcd
// could not be reached (for the helpers that wait for the pool lock meanwhile).
struct Run {
    const protocol::Scope& scope;
    cluster::NodeFiles files;
    bool marks_unavailable = false;  // set once this run holds the pool lock
    // Set once the store passed the guards: the run then remembers the highest revision it saw
    // (cluster/revision_floor.h).
    const cluster::EtcdClient* store_seen = nullptr;

    // Every revision this run saw is the store's own (it passed the guard first), so the node
    // remembers the highest whether the op succeeded or not: a write the op made before
    // failing (a block claimed, its cache write failed) is then under the floor too, and a
    // store restored to before it is caught. A failed write only leaves an older floor (a
    // weaker guard next time): the op's own answer stands.
    void remember_revision() const {
        if (store_seen != nullptr) {
            (void)cluster::raise_revision_floor(scope.state_dir, store_seen->highest_revision());
        }
    }
    int fail(const Error& e) const {
        remember_revision();
        if (e.code == Code::kUnavailable && marks_unavailable) {
            cluster::touch(files.unavailable(scope.pool), e.msg + "\n");
        }
        std::cout << protocol::error_json(e).dump() << "\n";
        return 1;
    }
    int answer(const json& a) const {
        remember_revision();  // before the answer: a caller told "done" finds it remembered
        std::cout << a.dump() << "\n";
        return 0;
    }
};

int fail_before_scope(const Error& e) {
    std::cout << protocol::error_json(e).dump() << "\n";
    return 1;
}

pools::IpSet usable_set(const std::vector<protocol::AddressRange>& ranges, engine::Family family) {
    pools::IpSet out(ranges.empty() ? family : ranges.front().first.family);
    for (const auto& r : ranges) out.add(r.first.value, r.last.value);
    return out;
}

// What the pool state `pool_state` says of the local fixed claim (key, ifname), read now (after
// the etcd claim was read): absent, or its use; kNoState when there is no state yet (nothing
// of it is in use here); kUnreadable when the state cannot be read, which both callers take as
// the claim being there and in use (an address left claimed is an operator's cleanup, one
// given twice an outage).
enum class LocalClaim { kAbsent, kIdle, kInUse, kNoState, kUnreadable };
LocalClaim local_claim(const std::string& pool_state, const std::string& key,
                       const std::string& ifname) {
    auto store = engine::NetworkStore::open_existing(pool_state, shm::Access::kReadOnly);
    if (!store) {
        return ::access(pool_state.c_str(), F_OK) == 0 ? LocalClaim::kUnreadable
                                                       : LocalClaim::kNoState;
    }
    engine::NetworkConfig cfg;
    const engine::Fingerprint fp = engine::fingerprint(key, ifname);
    for (const auto& c : engine::Allocator(**store, cfg).claims()) {
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

// The first usable address no fixed claim holds.
std::optional<engine::IpAddress> first_untaken(const pools::IpSet& usable,
                                               const std::set<std::string>& taken) {
    for (const auto& i : usable.intervals()) {
        for (engine::u128 v = i.first;; ++v) {
            const engine::IpAddress a{v, usable.family()};
            if (taken.count(a.to_string()) == 0) return a;
            if (v == i.last) break;
        }
    }
    return std::nullopt;
}

int take_fixed(const Run& run, cluster::EtcdClient& etcd, const std::string& prefix,
               const protocol::TakeFixed& r) {
    // No usable address listed would make every claim unusable (and given up): refused.
    if (r.usable.empty()) {
        return run.fail(
            make_error(Code::kInvalidConfig,
                       "the cluster helper's take-fixed request lists no usable address"));
    }
    // A pool of fixed addresses is registered like any pool (never cut: block prefix 0), so that
    // no other pool's blocks or claims overlap its addresses.
    if (auto st = cluster::register_pool(etcd, prefix, r.scope.pool, r.pool_cidr, 0); !st) {
        return run.fail(st.error());
    }
    cluster::FixedClaims claims(etcd, prefix);
    const pools::IpSet usable = usable_set(r.usable, engine::Family::kV4);
    std::string moved_from;
    // A requested address is taken when free and allocatable, and only then.
    const auto pick = [&](const std::set<std::string>& taken) -> std::optional<engine::IpAddress> {
        if (!r.address) return first_untaken(usable, taken);
        if (taken.count(r.address->to_string()) != 0 || !usable.contains(*r.address)) {
            return std::nullopt;
        }
        return r.address;
    };
    // A claim of this node no longer allocatable is replaced only when no sandbox here uses it.
    const auto keep = [&](const engine::IpAddress& a) {
        return usable.contains(a) || in_use_here(r.pool_state, r.claim_key, r.ifname);
    };
    auto got =
        claims.take(r.scope.pool, r.claim_key, r.scope.node, r.keep_idle, pick, &moved_from, keep);
    if (!got && r.address && got.error().code == Code::kNoAddressFree) {
        return run.fail(make_error(Code::kRequestedAddressTaken,
                                   "requested IP address " + r.address->to_string() + " of " +
                                       r.scope.pool + " is held by another fixed claim"));
    }
    if (!got) return run.fail(got.error());
    return run.answer(protocol::to_json(protocol::FixedAnswer{got->address, moved_from}));
}

int give_up_fixed(const Run& run, cluster::EtcdClient& etcd, const std::string& prefix,
                  const protocol::GiveUpFixed& r) {
    cluster::FixedClaims claims(etcd, prefix);
    auto done = claims.give_up(r.scope.pool, r.claim_key, r.scope.node,
                               [&] { return unheld_here(r.pool_state, r.claim_key, r.ifname); });
    if (!done) return run.fail(done.error());
    if (!*done && !r.pool_state.empty() &&
        local_claim(r.pool_state, r.claim_key, r.ifname) == LocalClaim::kIdle) {
        // Kept here, idle, by its policy: the store's claim says since when (read after the
        // local claim, so a take that made it in use again meanwhile is not undone: the mark
        // compares the revision read).
        auto held = claims.get(r.scope.pool, r.claim_key);
        if (!held) return run.fail(held.error());
        if (*held && (*held)->node == r.scope.node) {
            auto marked = claims.mark_idle(r.scope.pool, **held, uint64_t(std::time(nullptr)));
            if (!marked) return run.fail(marked.error());
        }
    }
    return run.answer(protocol::to_json(protocol::GiveUpAnswer{*done}));
}

// The pool has no block left for this node: it records that it waits, and the answer names the
// nodes whose idle blocks it waits for (their node pass gives one back), or, when no block is
// idle, the nodes holding the pool's blocks.
Status note_waiting(const Run& run, cluster::Waiting& waiting,
                    const std::vector<cluster::Block>& owned, const protocol::BlockGeometry& g,
                    protocol::BlockAnswer& out) {
    if (auto st = waiting.mark_waiting(run.scope.pool, run.scope.node, g.usable); !st) return st;
    auto idle = waiting.idle(run.scope.pool);
    if (!idle) return idle.error();
    std::set<std::string> idle_nodes, holders;
    for (const auto& b : owned) {
        holders.insert(b.node);
        for (const auto& i : *idle) {
            // Only a record that still names the block's owner (one left from an earlier owner
            // says nothing).
            if (i.block.to_string() == b.cidr.to_string() && i.node == b.node &&
                b.node != run.scope.node) {
                idle_nodes.insert(b.node);
            }
        }
    }
    out.waiting_for.assign(idle_nodes.begin(), idle_nodes.end());
    out.holders.assign(holders.begin(), holders.end());
    return Ok{};
}

// ClaimBlock and Refresh: a block claimed (or none, with Refresh), then the node's block cache
// rewritten from the store.
int claim_or_refresh(const Run& run, cluster::BlockStore& store, cluster::Waiting& waiting,
                     std::vector<cluster::Block> owned, const protocol::BlockGeometry& g,
                     const protocol::ClaimBlock* claim) {
    const protocol::Scope& s = run.scope;
    if (auto st = store.check_geometry(s.pool, g.pool_cidr, g.block_prefix); !st) {
        return run.fail(st.error());
    }
    const pools::IpSet usable = usable_set(g.usable, g.pool_cidr.address.family);
    const auto worth = [&](const engine::Cidr& c) {
        return g.usable.empty() || !usable.intersect(c).empty();
    };
    auto cache = cluster::read_block_cache(run.files.block_cache(s.pool));
    if (!cache) return run.fail(cache.error());
    protocol::BlockAnswer out;
    // A block of this node the caller did not know of (another ADD's helper claimed it while
    // this one waited for the lock, or a helper died after claiming it): that one first.
    std::set<std::string> seen;
    for (const auto& c : g.seen) seen.insert(c.to_string());
    std::optional<engine::Cidr> unseen;
    for (const cluster::Block& b : owned) {
        if (b.node == s.node && seen.count(b.cidr.to_string()) == 0 && worth(b.cidr)) {
            unseen = b.cidr;
        }
    }
    if (claim == nullptr) {
        // Refresh: only the cache brought in line with the store, below.
    } else if (claim->address) {
        auto b = store.claim_holding(s.pool, g.pool_cidr, g.block_prefix, *claim->address, s.node,
                                     claim->max_blocks);
        if (!b) return run.fail(b.error());
        out.claimed = b->cidr;
    } else if (unseen) {
        out.claimed = unseen;
    } else {
        auto b = store.claim_next(s.pool, g.pool_cidr, g.block_prefix, s.node, claim->max_blocks,
                                  &out.at_cap, worth);
        if (!b) return run.fail(b.error());
        if (*b) out.claimed = (*b)->cidr;
        // Nothing to claim: ADDs stop starting helpers ahead of need for a while.
        if (!*b) cluster::touch(run.files.ahead_none(s.pool));
        if (!*b && !out.at_cap && !claim->ahead) {
            if (auto st = note_waiting(run, waiting, owned, g, out); !st) {
                return run.fail(st.error());
            }
        } else if (*b) {
            (void)waiting.clear_waiting(s.pool, s.node);  // a stale record only ages out
        }
    }
    // The node's blocks of the pool, as the store says now (if it cannot say, what the cache
    // had plus what was just claimed: a claimed block is never left out of the cache).
    auto now = store.blocks(s.pool);
    if (!now) {
        if (out.claimed) {
            std::vector<cluster::OwnedBlock> kept = *cache;
            kept.push_back({*out.claimed, 0});
            (void)cluster::write_block_cache(run.files.block_cache(s.pool), kept);
        }
        return run.fail(now.error());
    }
    std::vector<cluster::OwnedBlock> mine;
    for (const cluster::Block& b : *now) {
        if (b.node != s.node) continue;
        mine.push_back({b.cidr, b.mod_revision});
        out.blocks.push_back(b.cidr);
    }
    if (auto st = cluster::write_block_cache(run.files.block_cache(s.pool), mine); !st) {
        return run.fail(st.error());
    }
    return run.answer(protocol::to_json(out));
}

const protocol::Scope& scope_of(const protocol::Request& r) {
    return std::visit([](const auto& op) -> const protocol::Scope& { return op.scope; }, r);
}

bool lock_handed_over(const protocol::Request& r) {
    if (const auto* c = std::get_if<protocol::ClaimBlock>(&r)) return c->lock_handed_over;
    if (const auto* f = std::get_if<protocol::Refresh>(&r)) return f->lock_handed_over;
    if (const auto* t = std::get_if<protocol::TakeFixed>(&r)) return t->lock_handed_over;
    return false;
}

int serve(const protocol::Request& req) {
    const protocol::Scope& scope = scope_of(req);
    Run run{scope, cluster::NodeFiles{scope.state_dir, ""}};
    auto cfg = cluster::etcd_config_from_json(scope.etcd);
    if (!cfg) return run.fail(cfg.error());
    // One helper at a time per node and pool: two that each read, claim and write the cache
    // could write it in the wrong order and lose a block. A caller that holds the lock hands it
    // over as fd 3 (so no second helper starts meanwhile).
    timespec started{};
    ::clock_gettime(CLOCK_REALTIME, &started);
    std::optional<cluster::PoolLock> lock;
    if (lock_handed_over(req) && ::fcntl(protocol::kHandedLockFd, F_GETFD) >= 0) {
        lock = cluster::PoolLock::adopt(protocol::kHandedLockFd);
    } else {
        auto got = cluster::PoolLock::acquire(run.files.lock(scope.pool),
                                              cluster::kLockWaitBudgets * cfg->budget_ms);
        if (!got) return run.fail(got.error());
        lock = std::move(*got);
    }
    // A helper that waited for the lock while the one holding it found etcd unreachable fails
    // at once with that answer: ADDs that pile up on a node when etcd has no quorum each wait at
    // most for the holder's budget, not for every earlier one's as well.
    if (auto e = cluster::unavailable_since(run.files, scope.pool, started)) return run.fail(*e);
    run.marks_unavailable = true;
    cluster::EtcdClient etcd(*cfg);
    const std::string prefix = cluster::etcd_prefix(scope.etcd);
    cluster::BlockStore store(etcd, prefix);
    // Which cluster answers, before anything is claimed in it.
    auto owned = store.blocks(scope.pool);
    if (!owned) return run.fail(owned.error());
    if (auto st = cluster::check_cluster_id(scope.state_dir, etcd.last_header().cluster_id); !st) {
        return run.fail(st.error());
    }
    // And whether it went back in time (rebuilt with the same flags, or restored from a
    // snapshot: the same cluster id), before anything is claimed in it or the cache rewritten,
    // and before the schema record is written into it.
    if (auto st = cluster::check_revision_floor(scope.state_dir, etcd.last_header().revision);
        !st) {
        return run.fail(st.error());
    }
    run.store_seen = &etcd;
    // The store's layout, before anything is read as this release's or written.
    if (auto st = cluster::ensure_schema(etcd, prefix); !st) return run.fail(st.error());
    if (const auto* t = std::get_if<protocol::TakeFixed>(&req)) {
        return take_fixed(run, etcd, prefix, *t);
    }
    if (const auto* u = std::get_if<protocol::GiveUpUnheld>(&req)) {
        cluster::FixedClaims claims(etcd, prefix);
        auto all = claims.all(u->scope.pool);
        if (!all) return run.fail(all.error());
        protocol::GiveUpAnswer out;
        for (const auto& c : *all) {
            if (c.node != u->scope.node) continue;
            const std::string ifname = cluster::ifname_of_claim_key(c.key);
            auto done = claims.give_up(u->scope.pool, c.key, u->scope.node,
                                       [&] { return unheld_here(u->pool_state, c.key, ifname); });
            if (!done) return run.fail(done.error());
            out.released = out.released || *done;
        }
        return run.answer(protocol::to_json(out));
    }
    if (const auto* f = std::get_if<protocol::ReadFixed>(&req)) {
        auto all = cluster::FixedClaims(etcd, prefix).all(f->scope.pool);
        if (!all) return run.fail(all.error());
        protocol::FixedOwnerAnswer out;
        for (const auto& c : *all) {
            if (c.key == f->claim_key) out = {c.node, c.address};
        }
        return run.answer(protocol::to_json(out));
    }
    if (const auto* g = std::get_if<protocol::GiveUpFixed>(&req)) {
        return give_up_fixed(run, etcd, prefix, *g);
    }
    if (const auto* r = std::get_if<protocol::ReleaseBlock>(&req)) {
        auto out = cluster_helper::release_block(*r, store, *owned);
        if (!out) return run.fail(out.error());
        // The block's idle record goes with it (a later owner's pass records its own).
        if (out->released) (void)cluster::Waiting(etcd, prefix).clear_idle(r->scope.pool, r->block);
        return run.answer(protocol::to_json(*out));
    }
    cluster::Waiting waiting(etcd, prefix);
    if (const auto* c = std::get_if<protocol::ClaimBlock>(&req)) {
        return claim_or_refresh(run, store, waiting, std::move(*owned), c->geometry, c);
    }
    const auto& refresh = std::get<protocol::Refresh>(req);
    return claim_or_refresh(run, store, waiting, std::move(*owned), refresh.geometry, nullptr);
}

}  // namespace

SHMIPAM_STAMP_BUILD_VERSION();  // read by shmipamctl install

int main() {
    try {
        const std::string text{std::istreambuf_iterator<char>(std::cin),
                               std::istreambuf_iterator<char>()};
        auto req = protocol::decode(text);
        if (!req) return fail_before_scope(req.error());
        return serve(*req);
    } catch (const std::exception& e) {
        // Every answer is a CNI error the plugin can pass on, never a crash with no answer.
        return fail_before_scope(
            make_error(Code::kInternal, std::string("the cluster helper failed: ") + e.what()));
    }
}
