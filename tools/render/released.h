// The answer of `release` and `gc`: which attachments were (or would be) released, as text and
// JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/ops/allocator.h"

namespace shmipam::tools {

nlohmann::json released_json(const std::vector<engine::ReleasedAttachment>& rs, bool applied);
std::string released_text(const std::vector<engine::ReleasedAttachment>& rs, bool applied);

}  // namespace shmipam::tools
