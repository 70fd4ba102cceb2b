// Result and error JSON in the caller's cniVersion.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/ops/allocator.h"

namespace shmipam::cni {

// {"cniVersion", "ips": [{"address": "a/prefix", "gateway"}], "routes", "dns"}; results for
// 0.3.x and 0.4.0 also carry ips[].version.
nlohmann::json make_result(const std::string& cni_version,
                           const std::vector<engine::AllocatedAddress>& addrs,
                           const nlohmann::json& routes, const nlohmann::json& dns);

// One ips[] element: "address/prefix", the gateway when there is one, and "version" in results
// before 1.0.0.
nlohmann::json ip_json(const std::string& cni_version, const engine::IpAddress& address, int prefix,
                       const std::optional<engine::IpAddress>& gateway);
// The result object around its ips and routes (routes left out when empty).
nlohmann::json result_json(const std::string& cni_version, nlohmann::json ips,
                           const nlohmann::json& routes, const nlohmann::json& dns);

nlohmann::json make_error_json(const std::string& cni_version, const Error& e);

nlohmann::json make_version_json();

}  // namespace shmipam::cni
