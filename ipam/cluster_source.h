// Cluster mode's AddressSource (docs/cluster.md): a node allocates a pool's addresses inside the
// blocks of it the node owns, read from its block cache (no etcd call on the ADD path while they
// have room), and execs the cluster helper (cluster/helper_protocol.h) on the rare path that
// needs the store: another block, a fixed claim across nodes, a block given back.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "cluster/helper_protocol.h"
#include "cluster/node_files.h"
#include "ipam/address_source.h"

namespace shmipam::ipam {

// An ADD looks at the node's blocks of a pool at most this many times: concurrent ADDs on the
// node may fill the block just claimed (by its helper, or another ADD's) before this one gets
// there, and a block may be given back meanwhile; more rounds than that is a node thrashing,
// which the runtime's retry serves better than a longer ADD.
inline constexpr int kClusterFillRounds = 9;

// Where the node's block caches, locks, markers and pinned cluster id live: <dataDir>/_cluster
// (and <runDir>/_cluster for what a reboot must forget).
cluster::NodeFiles node_files(const Request& r);

// `usable` narrowed to the blocks this node owns of `pool`, as its cache says: those a DEL
// marked to be given back (emptied) apart, for ADDs to try last, so that a node under churn
// lets an emptied block drain instead of refilling it at once.
struct OwnBlocks {
    pools::IpSet kept, marked;
    pools::IpSet all() const;
};
Expected<OwnBlocks> in_own_blocks(const cluster::NodeFiles& files, const std::string& pool,
                                  const pools::IpSet& usable);

// How ClusterSource reaches the cluster agent (cluster/agent.h): the helper program it execs
// (shmipam-cluster: the plugin links no etcd client), or, in the unit tests, the agent served
// in process over an in-memory store.
class AgentRunner {
  public:
    virtual ~AgentRunner() = default;
    // The agent's answer to `request` (cluster/helper_protocol.h, encoded), or why it could not
    // be asked. `lock_fd` >= 0: the pool lock, held by the caller, handed over (the helper's
    // fd 3); -1: the agent takes it.
    virtual Expected<std::string> run(const std::string& request, int lock_fd) = 0;
    // Started and never waited for: it outlives the invocation (a block claimed ahead of need,
    // a block given back), holding the lock handed over (`lock_fd`, or -1) until it is done.
    virtual void start_detached(const std::string& request, int lock_fd) = 0;
};

class ClusterSource final : public AddressSource {
  public:
    // The agent reached through the helper the config names (ipam.clusterHelper), else
    // shmipam-cluster beside the plugin.
    explicit ClusterSource(const Request& r);
    // The agent reached through `agent`, which outlives this.
    ClusterSource(const Request& r, AgentRunner& agent);

    bool fixed_across_nodes(const std::string& pool) const override;
    // Only the fixed-address pools: in a pool cut into blocks a sticky address would pin its
    // block to this node.
    bool keeps_default_claims(const std::string& pool) const override {
        return fixed_across_nodes(pool);
    }
    // A node's first ADD of the pool since it booted (no reconciled marker, which lives on
    // tmpfs): the helper brings the cache in line with the store, adopting blocks the store
    // gives the node (a helper that died after its claim) and dropping blocks the store gives to
    // another node or none (taken by a gc while the node was down). When etcd cannot be reached
    // the cache is used as it is.
    void prepare(const PoolTarget& t) override;
    Expected<std::vector<pools::IpSet>> places(const PoolTarget& t, bool fixed) override;
    // Every address lies in a block the node's cache lists now (false when it cannot be read);
    // fixed-address pools are never cut into blocks: true.
    bool still_serves(const std::string& pool,
                      const std::vector<engine::AllocatedAddress>& addresses) override;
    // Claims ahead of need (ipam.claimAheadPercent): when fewer than (100 - N)% of a block's
    // addresses are left free in `places` (their union; by the bitmap hint), starts the helper
    // detached, with the pool lock handed over, so the next block is claimed while pods keep
    // starting and no ADD waits on etcd. Best effort and silent: an ADD that finds no room still
    // claims for itself. Not started while another helper of the pool runs (the lock is held), nor
    // for kAheadNoneQuietS after a helper found nothing to claim.
    void after_allocation(const PoolTarget& t, const std::vector<pools::IpSet>& places,
                          engine::NetworkStore& store) override;
    // Asks the helper for a block of the pool (the one holding `wanted`, if given): true when the
    // node has a new block (the cache was rewritten), false when none is left or the node is at
    // its cap (`why` says which); the helper's error otherwise (50: etcd unavailable). Helpers
    // of a node and pool take turns under the pool lock; the turn is waited for here, not in a
    // helper exec'd for nothing: when twenty ADDs find the node's blocks full at once, the first
    // one's helper claims a block, and the nineteen after it find the block in the cache.
    Expected<bool> make_room(const PoolTarget& t, const std::optional<engine::IpAddress>& wanted,
                             std::string* why) override;
    int fill_rounds() const override { return kClusterFillRounds; }
    std::string where() const override { return " in this node's blocks"; }
    // The fixed claim's address from etcd (taken over from another node if the pod moved, or a
    // new one among t.usable: code 100 when none is left; 50 without etcd), taken under the pool
    // lock, which the FixedTake holds until the caller's local fixed claim is made: a DEL of the
    // pod's old sandbox gives the etcd claim up under the same lock after looking for a local
    // fixed claim, so it either finds this ADD's and keeps the etcd claim, or gives it up before
    // this take, which then takes it anew; never between a take that found the claim this
    // node's (no write) and the local claim, which would leave an address etcd gives no claim.
    Expected<FixedTake> take_fixed(const PoolTarget& t, const engine::ClaimSpec& claim,
                                   const std::optional<engine::IpAddress>& wanted) override;
    // In a fixed-address pool, asks the store (the helper's read-fixed) whether the pod's claim
    // still names this node and one of the addresses `held`: a pod started on another node took
    // it over, or the claim was made again on another address (it was given up and taken anew
    // while this sandbox ran), or it is gone; this sandbox must not answer it any more (its
    // repeated ADD and CHECK fail with 123).
    Status still_held(const Request& r, const std::string& pool,
                      const std::vector<engine::AllocatedAddress>& held) override;
    // A GC that released attachments: the node's blocks of the pool left with no address in use
    // are marked to be given back (and a due one's release started), as after a DEL; in a
    // fixed-address pool, the etcd claims of this node that the pool state holds no more (freed
    // by their policy) are given up.
    Status after_gc(const std::string& pool, size_t released, engine::NetworkStore& store) override;
    bool tracks_releases() const override { return true; }
    // A block of the node left with no address in use is marked to be given back (when the node
    // has another block of the pool), and a marked block whose time has come is handed to a
    // helper started detached (docs/cluster.md, "Giving a block back"). In a fixed-address pool,
    // a DEL that freed the pod's local fixed claim (policy 0) gives the etcd claim up too, if it
    // is still this node's and the helper, once it has read it, finds no local fixed claim made
    // again meanwhile.
    Status after_release(const Request& r, const std::string& pool,
                         const std::vector<engine::IpAddress>& released, engine::Allocator& alloc,
                         engine::NetworkStore& store) override;

  private:
    // Marks the blocks among `blocks` left with no address in use to be given back (the node
    // keeps one block per pool), and starts the release of one whose time has come.
    void mark_emptied_blocks(const std::string& pool, const std::vector<engine::Cidr>& blocks,
                             engine::NetworkStore& store);
    cluster::protocol::Scope scope(const std::string& pool) const;
    cluster::protocol::BlockGeometry geometry(const PoolTarget& t) const;
    // The pool lock, waited for at most the bound of cluster/node_files.h; code 50 at once when
    // a helper found etcd unreachable while this invocation waited.
    Expected<cluster::PoolLock> lock_pool(const std::string& pool) const;

    const Request& request_;
    const ClusterMode& mode_;
    cluster::NodeFiles files_;
    std::unique_ptr<AgentRunner> own_agent_;  // the helper exec'd, unless one was handed in
    AgentRunner* agent_;
};

}  // namespace shmipam::ipam
