// What shmipamctl cluster recover prints (tools/cluster_recover.h), as text or JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tools/cluster_recover.h"

namespace shmipam::tools {

nlohmann::json cluster_recover_json(const RecoverReport& r, bool applied);
std::string cluster_recover_text(const RecoverReport& r, bool applied);

}  // namespace shmipam::tools
