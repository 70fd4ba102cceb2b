// What one CNI invocation does, given its request (ipam/request.h): in ranges mode (host-local's
// config) on the network's own state; in pool mode (ipam.poolsDir) over the pools catalog and
// the source of addresses this node has (its whole pools, or its blocks in cluster mode). Each
// leaves what the process keeps until it exits in `upkeep`.
#pragma once

#include "base/status.h"
#include "ipam/request.h"

namespace shmipam::ipam {

Expected<AddResult> add(const Request& r, Upkeep& upkeep);
Status del(const Request& r, Upkeep& upkeep);
Status check(const Request& r, Upkeep& upkeep);
Status gc(const Request& r, Upkeep& upkeep);
Status status(const Request& r, Upkeep& upkeep);

}  // namespace shmipam::ipam
