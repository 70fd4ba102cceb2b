// The answer of shmipamctl claims create and claims import: each claim with what was (or would
// be) done with it, and why one was refused.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/claim_plan.h"

namespace shmipam::tools {

nlohmann::json claim_plans_json(const std::vector<ClaimPlan>& plans, bool applied);
std::string claim_plans_text(const std::vector<ClaimPlan>& plans, bool applied);

}  // namespace shmipam::tools
