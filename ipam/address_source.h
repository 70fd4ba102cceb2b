// Where a node may allocate a pool's addresses: the seam between what one ADD or DEL does in pool
// mode (ipam/pool_add.cpp, ipam/pool_release.cpp) and where the addresses come from. Two
// implementations: LocalSource (ipam/local_source.h: the pool's whole allocatable set, one node)
// and ClusterSource (ipam/cluster_source.h: the blocks of the pool this node owns in the cluster
// store, and the cluster helper when it needs another). The ADD asks it and never asks which
// one it is (host-local's allocator over its Store interface is the model).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/addr/ip_address.h"
#include "engine/ops/allocator.h"
#include "engine/state/network_store.h"
#include "ipam/request.h"
#include "pools/ip_set.h"

namespace shmipam::ipam {

// A pool (or subnet) an ADD may allocate from: its name, CIDR and allocatable addresses.
struct PoolTarget {
    const std::string& pool;
    const engine::Cidr& cidr;
    const pools::IpSet& usable;
};

// A fixed claim's address taken across nodes, with what must stay held until the local fixed
// claim is made (the pool lock: a DEL of the pod's old sandbox gives the etcd claim up only
// under it).
struct FixedTake {
    engine::IpAddress address;
    std::shared_ptr<void> hold;
};

class AddressSource {
  public:
    virtual ~AddressSource() = default;

    // Whether the pool's addresses are taken one by one across nodes by fixed claims (then an
    // ADD serves it through take_fixed alone, and only pods with a fixed claim).
    virtual bool fixed_across_nodes(const std::string& pool) const = 0;
    // Whether a pod that keeps its address by the StatefulSet default alone keeps it in the pool
    // (ipam/fixed_claim.h, claim_by_default); otherwise it gets an ordinary address there.
    virtual bool keeps_default_claims(const std::string& pool) const = 0;
    // Before an ADD's first attempt in a pool.
    virtual void prepare(const PoolTarget& t) = 0;
    // The address sets to try, in order; `fixed` for a pod with a fixed claim (which a narrower
    // set would drop: it gets one set, all at once).
    virtual Expected<std::vector<pools::IpSet>> places(const PoolTarget& t, bool fixed) = 0;
    // Whether addresses taken in the pool are still this node's to give out (checked after an
    // ADD took them, and for what a repeated ADD finds held).
    virtual bool still_serves(const std::string& pool,
                              const std::vector<engine::AllocatedAddress>& addresses) = 0;
    // After an ADD took a new address from `places` in `store`.
    virtual void after_allocation(const PoolTarget& t, const std::vector<pools::IpSet>& places,
                                  engine::NetworkStore& store) = 0;
    // Every place was full: makes room, true when the ADD should look again; false with `why`
    // when there is none to make; an error that fails the ADD.
    virtual Expected<bool> make_room(const PoolTarget& t,
                                     const std::optional<engine::IpAddress>& wanted,
                                     std::string* why) = 0;
    // How many times an ADD looks at the places of one pool.
    virtual int fill_rounds() const = 0;
    // Words a reason adds after the pool's name ("all IP addresses used out of p<these>").
    virtual std::string where() const = 0;
    // A pool with fixed_across_nodes: the address of the fixed claim `claim` (`wanted` for a
    // new claim, when the ADD asks for one), which carries the claim's reclaim policy.
    virtual Expected<FixedTake> take_fixed(const PoolTarget& t, const engine::ClaimSpec& claim,
                                           const std::optional<engine::IpAddress>& wanted) = 0;
    // After a CNI GC released `released` attachments of the state `store` of `pool`.
    virtual Status after_gc(const std::string& pool, size_t released,
                            engine::NetworkStore& store) = 0;
    // Whether the attachment of `r` may still use `held`, what it holds in `pool` (its repeated
    // ADD and CHECK ask): 123 when the pod's fixed claim moved to another node's newer sandbox,
    // or was made again (here or elsewhere) on another address, or is gone.
    virtual Status still_held(const Request& r, const std::string& pool,
                              const std::vector<engine::AllocatedAddress>& held) = 0;
    // Whether after_release needs the addresses a DEL let go of (they are looked up first).
    virtual bool tracks_releases() const = 0;
    // After a DEL of `r` let go of `released` in the state `store` of `pool`.
    virtual Status after_release(const Request& r, const std::string& pool,
                                 const std::vector<engine::IpAddress>& released,
                                 engine::Allocator& alloc, engine::NetworkStore& store) = 0;
};

// Where `r`'s node may allocate in its pools: the cluster's blocks when ipam.etcd is set, else
// the pools' whole ranges (ipam/operations.cpp).
std::unique_ptr<AddressSource> make_source(const Request& r);

}  // namespace shmipam::ipam
