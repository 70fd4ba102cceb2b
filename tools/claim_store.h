// An operator's fixed claim in cluster mode (shmipamctl claims create and claims import;
// docs/operations.md): what the cluster store must hold before the node's own claim is made,
// as the plugin's ADD takes the store's claim before it makes its local one.
#pragma once

#include "base/status.h"
#include "tools/claim_plan.h"

namespace shmipam::tools {

// Ok when nothing is needed (not cluster mode, or the store holds the claim already; a claim the
// node holds that the store lacks turns the plan's kPresent into kCreate). In a pool of
// ipam.fixedAddressPools: the claim is created in the store, carrying its policy and idle
// from now, if neither it nor its address is held there (never taken over: one another node
// or claim holds is refused, naming it); with `apply` false only checked. In a pool cut into
// blocks: the address's block must be one this node holds (its block cache), or the claim
// would hold an address another node's block serves. Code 7 for a refusal (plan.why is set and
// plan.status becomes kConflict); another code when the store cannot be read.
Status hold_in_cluster_store(const ClaimNetwork& net, ClaimPlan& plan, bool apply);

}  // namespace shmipam::tools
