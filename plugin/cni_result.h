// Result and error JSON in the caller's cniVersion.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/addr/ip_address.h"
#include "ipam/request.h"

namespace shmipam::cni {

// {"cniVersion", "ips": [{"address": "a/prefix", "gateway"}], "routes", "dns"}; results for
// 0.3.x and 0.4.0 also carry ips[].version.
nlohmann::json make_result(const std::string& cni_version, const ipam::AddResult& result,
                           const nlohmann::json& dns);

nlohmann::json make_error_json(const std::string& cni_version, const Error& e);

nlohmann::json make_version_json();

}  // namespace shmipam::cni
