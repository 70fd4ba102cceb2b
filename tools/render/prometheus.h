// Prometheus text exposition (version 0.0.4) of networks' counters and utilisation.
#pragma once

#include <string>
#include <vector>

#include "engine/inspect/inspect.h"

namespace shmipam::tools {

// Fixed-address claims of one network by use (docs/fixed-ips.md).
struct ClaimCounts {
    uint64_t in_use = 0;  // bound to a live sandbox, or to one unknown since a rebuild
    uint64_t idle = 0;
};

// claims: one per network, in the order of `networks` (empty: no claim family).
std::string metrics_text(const std::vector<engine::NetworkDump>& networks,
                         const std::vector<ClaimCounts>& claims = {});

}  // namespace shmipam::tools
