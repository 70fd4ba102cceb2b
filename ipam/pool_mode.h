// Pool mode (ipam.poolsDir): the CNI commands over Spiderpool-style pools (docs/pools.md). The
// pools/ rules pick the candidate pools; each pool (and each subnet a subnet annotation
// allocates from) has its own state, shared by every network config that selects it; `source`
// says where this node may allocate in a pool (ipam/address_source.h). Each function leaves
// what the process keeps until it exits in `upkeep`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "ipam/address_source.h"
#include "ipam/request.h"
#include "pools/catalog.h"

namespace shmipam::ipam {

// A repeated ADD answers what the attachment holds, wherever it is; otherwise each family's
// candidate pools in order, falling through past one that cannot serve (ipam/pool_add.cpp).
Expected<AddResult> pool_add(const Request& r, const pools::Catalog& catalog, AddressSource& source,
                             Upkeep& upkeep);
// The ADD of a pod whose facts the API server could not give (docs/kubernetes.md, "When the API
// server cannot be reached"): the pod's exact-name claim ("sts:<ns>/<pod>/<ifname>") that this
// node holds, in every pool state that has it, bound to the sandbox as the pod's own ADD would
// bind it; never in a pool of fixed addresses across nodes (another node may have been given
// the address meanwhile: only the cluster store can say), never in a place the source no longer
// serves, never a claim being released. nullopt when the node holds no such claim (the caller
// answers the API server's error); nothing is allocated anew.
struct HeldClaimBound {
    AddResult result;
    std::string claim;               // "<ns>/<pod>", as operators name it
    std::vector<std::string> pools;  // where it was bound
};
Expected<std::optional<HeldClaimBound>> pool_bind_held_claim(const Request& r,
                                                             const pools::Catalog& catalog,
                                                             AddressSource& source, Upkeep& upkeep);
// Every pool state of the node, whatever the pools directory says now: each is tried, and the
// first error returned (the runtime retries; the others are done).
Status pool_del(const Request& r, const pools::Catalog& catalog, AddressSource& source,
                Upkeep& upkeep);
Status pool_gc(const Request& r, const pools::Catalog& catalog, AddressSource& source,
               Upkeep& upkeep);
// What the attachment holds in every pool state, against prevResult's addresses in the pools.
Status pool_check(const Request& r, const pools::Catalog& catalog, AddressSource& source,
                  Upkeep& upkeep);
// 50 when poolsDir holds no pool and no subnet that could serve.
Status pool_status(const Request& r, const pools::Catalog& catalog);

}  // namespace shmipam::ipam
