// What shmipamctl cluster recover prints (cluster/node_recover.h), as text or JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "cluster/node_recover.h"

namespace shmipam::tools {

using RecoverRow = cluster::RecoverRow;
using RecoverReport = cluster::RecoverReport;

nlohmann::json cluster_recover_json(const RecoverReport& r, bool applied);
std::string cluster_recover_text(const RecoverReport& r, bool applied);

}  // namespace shmipam::tools
