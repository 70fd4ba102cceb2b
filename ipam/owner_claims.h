// Fixed claims kept while their StatefulSet wants the pod (the StatefulSet default's policy,
// format::kKeepIdleWhileOwnerWants; docs/fixed-ips.md): the engine keeps them like "never"; here
// they are checked against their sets through the Kubernetes helper and freed once a set no
// longer wants its pod (deleted, being deleted, or scaled below the pod's ordinal):
//   - at the pod's DEL, the pod's own claims, idle now;
//   - after the answer of a later ADD or DEL, every such idle claim of the node, at most once
//     per ipam.statefulSetRecheckS (claims whose DEL could not reach the API server, and sets
//     scaled down or deleted while the pod ran elsewhere).
// Neither ever fails the command: a set that cannot be read keeps its claims until the next
// check.
#pragma once

#include <vector>

#include "ipam/address_source.h"
#include "ipam/open_states.h"
#include "ipam/request.h"
#include "pools/catalog.h"

namespace shmipam::ipam {

// After the DEL of `r` let go of the sandbox in `opened`.
void release_unwanted_after_del(const Request& r, std::vector<OpenState>& opened,
                                AddressSource& source);

// When the node's last check is older than the recheck period, schedules one after the answer
// (the request is copied: the walk outlives the caller's).
void schedule_owner_recheck(const Request& r, Upkeep& upkeep);

}  // namespace shmipam::ipam
