// Ranges mode (host-local's config: ranges, subnet, ...): the operations on the network's own
// state, through the engine's allocator.
#pragma once

#include "base/status.h"
#include "ipam/request.h"

namespace shmipam::ipam {

Expected<AddResult> ranges_add(const Request& r, Upkeep& upkeep);
Status ranges_del(const Request& r, Upkeep& upkeep);
Status ranges_check(const Request& r, Upkeep& upkeep);
Status ranges_gc(const Request& r, Upkeep& upkeep);
Status ranges_status(const Request& r, Upkeep& upkeep);

}  // namespace shmipam::ipam
