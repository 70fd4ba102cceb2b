// Cluster mode's side of an ADD (docs/cluster.md): the addresses of a pool that lie in this
// node's blocks (read from the node's block cache, no etcd call), and the cluster helper exec'd
// when the node needs another block.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "engine/addr/ip_address.h"
#include "engine/ops/allocator.h"
#include "engine/state/network_store.h"
#include "plugin/netconf.h"
#include "pools/ip_set.h"

namespace shmipam::cni {

// Where the node's block caches and its pinned cluster id live: <dataDir>/_cluster.
std::string cluster_state_dir(const NetConf& nc);

// `usable` narrowed to the blocks this node owns of `pool`, as its cache says: those a DEL
// marked to be given back (emptied) apart, for ADDs to try last, so that a node under churn
// lets an emptied block drain instead of refilling it at once (docs/cluster.md).
struct OwnBlocks {
    pools::IpSet kept, marked;
    pools::IpSet all() const;
};
Expected<OwnBlocks> in_own_blocks(const NetConf& nc, const std::string& pool,
                                  const pools::IpSet& usable);

// A node's first ADD of `pool` since it booted (no <runDir>/_cluster/<pool>.reconciled, which
// lives on tmpfs): the helper brings the cache in line with the store, adopting blocks the store
// gives the node (a helper that died after its claim) and dropping blocks the store gives to
// another node or none (taken by a gc while the node was down), so they are never allocated
// from again. When etcd cannot be reached the cache is used as it is (docs/cluster.md).
void reconcile_after_boot(const NetConf& nc, const std::string& pool, const engine::Cidr& cidr,
                          const pools::IpSet& usable);

// The node's lock on a pool's helpers (<dataDir>/_cluster/<pool>.lock), held while this lives.
class PoolHelperLock {
  public:
    static Expected<std::unique_ptr<PoolHelperLock>> acquire(const NetConf& nc,
                                                             const std::string& pool);
    ~PoolHelperLock();
    PoolHelperLock(const PoolHelperLock&) = delete;
    PoolHelperLock& operator=(const PoolHelperLock&) = delete;
    int fd() const { return fd_; }

  private:
    explicit PoolHelperLock(int fd) : fd_(fd) {}
    int fd_;
};

// Fixed addresses across nodes (docs/cluster.md): the address of the claim `claim_key` in the
// fixed-address pool `pool`, taken over from another node if needed, or a new one among
// `usable`, through the helper, which runs under `held` (the caller keeps holding it until its
// local claim is made). Code 100 when the pool has none left; 50 without etcd.
Expected<engine::IpAddress> take_fixed_address(const NetConf& nc, const std::string& pool,
                                               const engine::Cidr& cidr, const pools::IpSet& usable,
                                               const std::string& claim_key,
                                               const PoolHelperLock& held);
// Gives the claim up in etcd if it is still this node's and the pool state `pool_state` holds
// the claim (claim_key, ifname) no more when the helper has read it (a DEL that freed it here).
Status give_up_fixed_address(const NetConf& nc, const std::string& pool,
                             const std::string& claim_key, const std::string& pool_state,
                             const std::string& ifname);

// Whether every address lies in a block the node's cache lists now (false when it cannot be
// read): an ADD's check after it took them.
bool still_own(const NetConf& nc, const std::string& pool,
               const std::vector<engine::AllocatedAddress>& addresses);

// Asks the cluster helper for a block of `pool` (the one holding `address`, if given); true when
// the node has a new block (the cache was rewritten), false when none is left or the node is at
// its cap (`why` says which). The helper's error otherwise (50: etcd unavailable).
// Only blocks with some of `usable` in them are claimed.
Expected<bool> claim_block(const NetConf& nc, const std::string& pool, const engine::Cidr& cidr,
                           const pools::IpSet& usable,
                           const std::optional<engine::IpAddress>& address, std::string* why);

// Claims ahead of need (ipam.claimAheadPercent): called after an ADD took an address from
// `here` (the node's blocks of `pool`, within `usable`). When fewer than (100 - N)% of a block's
// addresses are left free in them (by the bitmap hint), it starts the helper detached, with the
// pool's lock handed over, so the next block is claimed while pods keep starting and no ADD
// waits on etcd. Best effort and silent: an ADD that finds no room still claims for itself.
// Not started while another helper of the pool runs (its lock is held), nor for a minute after
// a helper found nothing to claim (the node at its cap, or the pool taken).
void claim_ahead(const NetConf& nc, const std::string& pool, const engine::Cidr& cidr,
                 const pools::IpSet& usable, const pools::IpSet& here, engine::NetworkStore& store);

// Cluster mode's DEL (docs/cluster.md, "Giving a block back"): `released` are the addresses a
// DEL just let go of in the state of `pool`. A block of the node left with no address in use is
// marked to be given back (when the node has another block of the pool); and a marked block
// whose time has come is handed to the helper, started detached as claim_ahead does.
void after_del(const NetConf& nc, const std::string& pool,
               const std::vector<engine::IpAddress>& released, engine::NetworkStore& store);

}  // namespace shmipam::cni
