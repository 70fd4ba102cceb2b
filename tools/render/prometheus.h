// Prometheus text exposition (version 0.0.4) of networks' counters and utilisation.
#pragma once

#include <string>
#include <vector>

#include "engine/inspect/inspect.h"

namespace shmipam::tools {

std::string metrics_text(const std::vector<engine::NetworkDump>& networks);

}  // namespace shmipam::tools
