// Prometheus text exposition (version 0.0.4) of networks' counters and utilisation.
#pragma once

#include <string>
#include <vector>

#include "engine/inspect/inspect.h"
#include "ipam/owner_recheck_record.h"

namespace shmipam::tools {

// Fixed-address claims of one network by use (docs/fixed-ips.md).
struct ClaimCounts {
    uint64_t in_use = 0;  // bound to a live sandbox, or to one unknown since a rebuild
    uint64_t idle = 0;
};

// claims: one per network, in the order of `networks` (empty: no claim family).
std::string metrics_text(const std::vector<engine::NetworkDump>& networks,
                         const std::vector<ClaimCounts>& claims = {});

// The node's StatefulSet rechecks (ipam/owner_recheck_record.h): when they last succeeded, how
// many failed, what they freed and what the last walk had to keep.
std::string recheck_metrics_text(const ipam::RecheckRecord& r);

}  // namespace shmipam::tools
