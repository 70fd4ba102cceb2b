#include "ipam/cluster_source.h"

#include <sys/stat.h>

#include <cstdio>
#include <ctime>
#include <set>

#include "cluster/block_cache.h"
#include "cluster/release_due.h"
#include "engine/addr/fingerprint.h"
#include "engine/inspect/inspect.h"
#include "ipam/fixed_claim.h"
#include "ipam/helper_exec.h"
#include "ipam/pool_state.h"

namespace shmipam::ipam {

namespace protocol = cluster::protocol;

cluster::NodeFiles node_files(const Request& r) {
    return {r.network.data_dir + "/_cluster", r.network.run_dir + "/_cluster"};
}

pools::IpSet OwnBlocks::all() const {
    pools::IpSet out = kept;
    for (const auto& i : marked.intervals()) out.add(i.first, i.last);
    return out;
}

Expected<OwnBlocks> in_own_blocks(const cluster::NodeFiles& files, const std::string& pool,
                                  const pools::IpSet& usable) {
    auto blocks = cluster::read_block_cache(files.block_cache(pool));
    if (!blocks) return blocks.error();
    std::set<std::string> marked;  // one getdents when none is
    for (const auto& due : cluster::read_release_due(files.state_dir, pool)) {
        marked.insert(due.block.to_string());
    }
    OwnBlocks out{pools::IpSet(usable.family()), pools::IpSet(usable.family())};
    for (const auto& b : *blocks) {
        if (b.cidr.address.family != usable.family()) continue;
        pools::IpSet& to = marked.count(b.cidr.to_string()) ? out.marked : out.kept;
        const pools::IpSet in_block = usable.intersect(b.cidr);
        for (const auto& i : in_block.intervals()) to.add(i.first, i.last);
    }
    return out;
}

namespace {

std::vector<protocol::AddressRange> ranges_of(const pools::IpSet& set) {
    std::vector<protocol::AddressRange> out;
    for (const auto& i : set.intervals()) {
        out.push_back({{i.first, set.family()}, {i.last, set.family()}});
    }
    return out;
}

// "a, b and c".
std::string joined(const std::vector<std::string>& names) {
    std::string out;
    for (size_t i = 0; i < names.size(); ++i) {
        out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
    }
    return out.empty() ? "no node" : out;
}

std::vector<engine::Cidr> cached_blocks(const cluster::NodeFiles& files, const std::string& pool) {
    std::vector<engine::Cidr> out;
    auto cached = cluster::read_block_cache(files.block_cache(pool));
    for (const auto& b : cached ? *cached : std::vector<cluster::OwnedBlock>{}) {
        out.push_back(b.cidr);
    }
    return out;
}

}  // namespace

namespace {

// The agent as a separate program: the helper exec'd with the request on its stdin. Its path is
// found only when it runs: most ADDs are served from the cache and exec nothing.
class ExecHelper final : public AgentRunner {
  public:
    explicit ExecHelper(const ClusterMode& mode) : mode_(mode) {}
    Expected<std::string> run(const std::string& request, int lock_fd) override {
        return run_helper(helper_path(mode_), request, lock_fd);
    }
    void start_detached(const std::string& request, int lock_fd) override {
        spawn_detached(helper_path(mode_), request, lock_fd);
    }

  private:
    const ClusterMode& mode_;
};

}  // namespace

ClusterSource::ClusterSource(const Request& r)
    : request_(r),
      mode_(*r.pools->cluster),
      files_(node_files(r)),
      own_agent_(std::make_unique<ExecHelper>(mode_)),
      agent_(own_agent_.get()) {}

ClusterSource::ClusterSource(const Request& r, AgentRunner& agent)
    : request_(r), mode_(*r.pools->cluster), files_(node_files(r)), agent_(&agent) {}

protocol::Scope ClusterSource::scope(const std::string& pool) const {
    return {mode_.etcd, pool, request_.pools->node_name, files_.state_dir};
}

protocol::BlockGeometry ClusterSource::geometry(const PoolTarget& t) const {
    const int prefix = t.cidr.address.family == engine::Family::kV4
                           ? request_.network.block_prefix_v4
                           : request_.network.block_prefix_v6;
    return {t.cidr, prefix, ranges_of(t.usable), cached_blocks(files_, t.pool)};
}

Expected<cluster::PoolLock> ClusterSource::lock_pool(const std::string& pool) const {
    timespec started{};
    ::clock_gettime(CLOCK_REALTIME, &started);
    auto lock =
        cluster::PoolLock::acquire(files_.lock(pool), cluster::kLockWaitBudgets * mode_.budget_ms);
    if (!lock) return lock.error();
    // ADDs piling up behind a helper that found etcd unreachable fail at once, each not waiting
    // a budget of its own after every earlier one's (the helper, handed the lock, starts its
    // clock after the wait and would not see it).
    if (auto e = cluster::unavailable_since(files_, pool, started)) return *e;
    return lock;
}

bool ClusterSource::fixed_across_nodes(const std::string& pool) const {
    return mode_.fixed_pools.count(pool) != 0;
}

void ClusterSource::prepare(const PoolTarget& t) {
    const std::string marker = files_.reconciled(t.pool);
    struct stat st {};
    if (::stat(marker.c_str(), &st) == 0) return;
    // Etcd found unreachable a short while ago: not asked again by every ADD (each would wait a
    // budget); the cache serves meanwhile.
    if (cluster::touched_within(files_.unavailable(t.pool), cluster::kUnavailableQuietS)) return;
    // One reconcile per node and pool: the ADDs that start together after a boot all find no
    // marker; they take turns on the pool lock, and the ones after the first find the marker
    // the first left under the lock and exec nothing (a helper each, in turn, is a wait of the
    // node's ADD count times a helper's run for the last of them).
    // Not reconciled (etcd unreachable, say): the cache serves as it is until a later ADD gets
    // through (or a block claim or release rewrites the cache from the store).
    const auto not_checked = [&](const Error& e) {
        std::fprintf(stderr, "shmipam: the node's blocks of %s not checked against etcd: %s\n",
                     t.pool.c_str(), e.msg.c_str());
    };
    auto lock = lock_pool(t.pool);
    if (!lock) return not_checked(lock.error());
    if (::stat(marker.c_str(), &st) == 0) return;
    protocol::Refresh req{scope(t.pool), geometry(t)};
    req.lock_handed_over = true;
    auto out = agent_->run(protocol::encode(req), lock->fd());
    auto answer = out ? protocol::block_answer(*out) : Expected<protocol::BlockAnswer>(out.error());
    if (!answer) return not_checked(answer.error());
    // Before the lock goes: the ADDs waiting for it find the marker.
    cluster::make_dirs(files_.run_dir);
    cluster::touch(marker);
}

Expected<std::vector<pools::IpSet>> ClusterSource::places(const PoolTarget& t, bool fixed) {
    auto mine = in_own_blocks(files_, t.pool, t.usable);
    if (!mine) return mine.error();
    if (fixed) return std::vector<pools::IpSet>{mine->all()};
    return std::vector<pools::IpSet>{mine->kept, mine->marked};
}

bool ClusterSource::still_serves(const std::string& pool,
                                 const std::vector<engine::AllocatedAddress>& addresses) {
    if (fixed_across_nodes(pool)) return true;
    auto blocks = cluster::read_block_cache(files_.block_cache(pool));
    if (!blocks) return false;
    for (const auto& a : addresses) {
        bool in = false;
        for (const auto& b : *blocks) {
            in = in || (b.cidr.address.family == a.address.family && b.cidr.contains(a.address));
        }
        if (!in) return false;
    }
    return true;
}

void ClusterSource::after_allocation(const PoolTarget& t, const std::vector<pools::IpSet>& tried,
                                     engine::NetworkStore& store) {
    pools::IpSet places(t.usable.family());
    for (const pools::IpSet& here : tried) {
        for (const auto& i : here.intervals()) places.add(i.first, i.last);
    }
    if (mode_.claim_ahead_percent == 0 || places.empty()) return;
    const int bits = places.family() == engine::Family::kV4 ? 32 : 128;
    const int prefix = places.family() == engine::Family::kV4 ? request_.network.block_prefix_v4
                                                              : request_.network.block_prefix_v6;
    const engine::u128 block_size = engine::u128{1} << (bits - prefix);
    engine::u128 free = places.count();
    for (const auto& i : places.intervals()) {
        auto taken =
            engine::hinted_taken(store, {i.first, places.family()}, {i.last, places.family()});
        if (!taken) return;
        free -= std::min<engine::u128>(free, *taken);
    }
    if (free * 100 > block_size * (100 - mode_.claim_ahead_percent)) return;
    if (cluster::touched_within(files_.ahead_none(t.pool), cluster::kAheadNoneQuietS)) return;
    // Held now, or not at all: another helper of the pool is at work, and its block will do.
    auto lock = cluster::PoolLock::try_acquire(files_.lock(t.pool));
    if (!lock) return;
    protocol::ClaimBlock req{scope(t.pool), geometry(t), mode_.max_blocks};
    req.ahead = true;
    req.lock_handed_over = true;
    agent_->start_detached(protocol::encode(req), lock->fd());
    // The lock stays with the helper, which shares the open file; ours closes with `lock`.
}

Expected<bool> ClusterSource::make_room(const PoolTarget& t,
                                        const std::optional<engine::IpAddress>& wanted,
                                        std::string* why) {
    protocol::ClaimBlock req{scope(t.pool), geometry(t), mode_.max_blocks, wanted};
    auto lock = lock_pool(t.pool);
    if (!lock) return lock.error();
    if (!wanted) {
        std::set<std::string> seen;
        for (const auto& b : req.geometry.seen) seen.insert(b.to_string());
        for (const auto& b : cached_blocks(files_, t.pool)) {
            // Another ADD's helper claimed it while this one waited.
            if (seen.count(b.to_string()) == 0) return true;
        }
    }
    req.lock_handed_over = true;
    auto out = agent_->run(protocol::encode(req), lock->fd());
    if (!out) return out.error();
    auto answer = protocol::block_answer(*out);
    if (!answer) return answer.error();
    if (!answer->claimed && !answer->at_cap && !answer->waiting_for.empty()) {
        // Free addresses exist in other nodes' idle blocks: the node now waits, and their node
        // pass gives one back; the runtime's retry then claims it.
        return make_error(
            Code::kTryAgainLater,
            "no block of " + t.pool + " is free; this node waits for one of the idle blocks of " +
                joined(answer->waiting_for) + ", which their node pass gives back: try again",
            "docs/cluster.md, \"No node shut out\"");
    }
    if (!answer->claimed) {
        *why = answer->at_cap
                   ? "node " + request_.pools->node_name + " holds its maximum of " +
                         std::to_string(mode_.max_blocks) + " blocks (ipam.maxBlocksPerNode)"
                   : "no block of " + t.pool + " is left in the cluster: every block holds pods (" +
                         joined(answer->holders) + " hold them)";
        return false;
    }
    return true;
}

Expected<FixedTake> ClusterSource::take_fixed(const PoolTarget& t, const engine::ClaimSpec& claim,
                                              const std::optional<engine::IpAddress>& wanted) {
    auto lock = lock_pool(t.pool);
    if (!lock) return lock.error();
    protocol::TakeFixed req{scope(t.pool), ranges_of(t.usable), claim.key, true, wanted};
    req.pool_cidr = t.cidr;
    req.keep_idle = claim.keep_idle;
    req.pool_state = pool_state_dir(request_.network.run_dir, t.pool);
    req.ifname = request_.key.ifname;
    auto out = agent_->run(protocol::encode(req), lock->fd());
    if (!out) return out.error();
    auto answer = protocol::fixed_answer(*out);
    if (!answer) return answer.error();
    return FixedTake{answer->address, std::make_shared<cluster::PoolLock>(std::move(*lock))};
}

Status ClusterSource::still_held(const Request& r, const std::string& pool,
                                 const std::vector<engine::AllocatedAddress>& held) {
    if (!fixed_across_nodes(pool)) return Ok{};
    auto fixed = fixed_claim_of(r);
    if (!fixed || !*fixed) return Ok{};
    const protocol::ReadFixed req{scope(pool), (*fixed)->key};
    auto out = agent_->run(protocol::encode(req), -1);
    auto owner = out ? protocol::fixed_owner_answer(*out)
                     : Expected<protocol::FixedOwnerAnswer>(out.error());
    if (!owner &&
        (owner.error().code == Code::kUnavailable || owner.error().code == Code::kTryAgainLater)) {
        // A claim moves only by another node's take, which that node's pass reports: without
        // the store, the running sandbox is answered from what this node holds.
        std::fprintf(stderr,
                     "shmipam: could not confirm that %s/%s's fixed claim in %s still names this "
                     "node: %s\n",
                     r.pod.namespace_.c_str(), r.pod.name.c_str(), pool.c_str(),
                     owner.error().msg.c_str());
        return Ok{};
    }
    if (!owner) return owner.error();
    const std::string pod = r.pod.namespace_ + "/" + r.pod.name;
    if (owner->node == request_.pools->node_name) {
        bool same = !owner->address.has_value();
        for (const auto& a : held) same = same || a.address == *owner->address;
        if (same) return Ok{};
        // This node's claim, on another address: it was given up and made again while this
        // sandbox ran (by a newer sandbox of the pod, or by hand), so the sandbox's address is
        // no longer the pod's and may be given to another pod.
        std::string mine;
        for (const auto& a : held) mine += (mine.empty() ? "" : ", ") + a.address.to_string();
        return make_error(Code::kClaimMoved,
                          "the fixed claim of " + pod + " in " + pool + " holds " +
                              owner->address->to_string() + " now, not " + mine +
                              ": this sandbox (" + r.key.container_id +
                              ") must not use its address any more",
                          "docs/cluster.md, \"Fixed addresses across nodes\"");
    }
    return make_error(Code::kClaimMoved,
                      "the fixed address of " + pod + " in " + pool + " is held by " +
                          (owner->node.empty() ? std::string("no node")
                                               : "node " + owner->node + "'s newer sandbox") +
                          ": this sandbox (" + r.key.container_id + ") must not use it any more",
                      "docs/cluster.md, \"Fixed addresses across nodes\"");
}

Status ClusterSource::after_release(const Request& r, const std::string& pool,
                                    const std::vector<engine::IpAddress>& released,
                                    engine::Allocator& alloc, engine::NetworkStore& store) {
    if (fixed_across_nodes(pool)) {
        auto fixed = fixed_claim_of(r);
        if (!fixed || !*fixed) return Ok{};
        bool kept = false;
        for (const auto& c : alloc.claims()) {
            kept = kept || c.fp == engine::fingerprint((*fixed)->key, r.key.ifname);
        }
        // Freed here: given up in the store. Kept idle by its policy: marked idle since now in
        // the store, so that `cluster gc` judges it by its policy should this node go; best
        // effort (the DEL has done what it must, and without the mark gc counts the claim idle
        // from when it first finds the node gone).
        const protocol::GiveUpFixed req{scope(pool), (*fixed)->key, store.dir(), r.key.ifname};
        auto out = agent_->run(protocol::encode(req), -1);
        auto answer =
            out ? protocol::give_up_answer(*out) : Expected<protocol::GiveUpAnswer>(out.error());
        if (!answer && kept) {
            std::fprintf(stderr, "shmipam: %s's fixed claim in %s not marked idle in etcd: %s\n",
                         (*fixed)->key.c_str(), pool.c_str(), answer.error().msg.c_str());
            return Ok{};
        }
        if (!answer) return answer.error();
        return Ok{};
    }
    std::vector<engine::Cidr> touched;
    for (const auto& a : released) touched.push_back(engine::Cidr{a, a.bits()});
    mark_emptied_blocks(pool, touched, store);
    return Ok{};
}

Status ClusterSource::after_gc(const std::string& pool, size_t released,
                               engine::NetworkStore& store) {
    if (released == 0) return Ok{};
    if (fixed_across_nodes(pool)) {
        const protocol::GiveUpUnheld req{scope(pool), store.dir()};
        auto out = agent_->run(protocol::encode(req), -1);
        if (!out) return out.error();
        auto answer = protocol::give_up_answer(*out);
        if (!answer) return answer.error();
        return Ok{};
    }
    std::vector<engine::Cidr> every;
    auto blocks = cluster::read_block_cache(files_.block_cache(pool));
    for (const auto& b : blocks ? *blocks : std::vector<cluster::OwnedBlock>{}) {
        every.push_back(b.cidr);
    }
    mark_emptied_blocks(pool, every, store);
    return Ok{};
}

void ClusterSource::mark_emptied_blocks(const std::string& pool,
                                        const std::vector<engine::Cidr>& touched,
                                        engine::NetworkStore& store) {
    auto blocks = cluster::read_block_cache(files_.block_cache(pool));
    if (!blocks || blocks->size() < 2) return;  // the node keeps one block per pool
    const uint64_t now = uint64_t(std::time(nullptr));
    for (const auto& t : touched) {
        for (const auto& b : *blocks) {
            if (b.cidr.address.family != t.address.family || !b.cidr.contains(t.address)) continue;
            auto in_use = engine::in_use_in_block(store, t.address);
            if (in_use && *in_use == 0) {
                // From when its addresses have cooled; the helper adds the block's minimum age.
                cluster::write_release_due(files_.state_dir, pool, b.cidr,
                                           now + (request_.network.reuse_delay_ms + 999) / 1000);
            }
        }
    }
    for (const cluster::ReleaseDue& due : cluster::read_release_due(files_.state_dir, pool)) {
        if (due.due_unix_s > now) continue;
        // The helper takes the pool lock itself, waiting while another helper of the pool (an
        // ADD's block claim) holds it, so a release is never dropped for a busy lock. The mark
        // moves on first, so that the DELs after this one do not start it again while it waits
        // or if it cannot decide (etcd down, say); it removes or rewrites the mark when it does.
        cluster::write_release_due(files_.state_dir, pool, due.block,
                                   now + uint64_t(cluster::kReleaseRetryS));
        const protocol::ReleaseBlock req{scope(pool), due.block, store.dir(),
                                         mode_.block_min_age_s};
        agent_->start_detached(protocol::encode(req), -1);
        return;  // one at a time: the next DEL starts the next
    }
}

}  // namespace shmipam::ipam
