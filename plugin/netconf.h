// The network configuration on stdin: the whole parent config, of which shmipam reads the
// top-level cniVersion / name / args / runtimeConfig / prevResult and its own "ipam" section
// (ipam/config.h reads the network's settings, for the plugin and every tool alike). Every
// host-local field is accepted with host-local's meaning; unknown fields are ignored.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/addr/ip_address.h"
#include "ipam/request.h"
#include "plugin/cni_args.h"
#include "plugin/cni_env.h"

namespace shmipam::cni {

inline const std::vector<std::string>& supported_versions() {
    static const std::vector<std::string> v{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"};
    return v;
}

// Just the version, for error output and the version gate (code 1 when unsupported).
Expected<std::string> read_cni_version(const nlohmann::json& doc);

// One invocation's request as the runtime passes it: the network's settings and the pod's
// metadata (ipam/config.h), the pod's names (CNI_ARGS), the requested addresses (args.cni.ips,
// else runtimeConfig.ips, else CNI_ARGS IP=), prevResult (CHECK) and the attachments still
// valid (GC). Code 6 for wrong JSON types, 7 for invalid values. The CNI version is
// read_cni_version's.
Expected<ipam::Request> parse_request(const nlohmann::json& doc, const CniEnv& env,
                                      const CniArgs& args);

// Parses a requested address ("10.1.2.3" or "10.1.2.3/24").
Expected<engine::IpAddress> parse_requested_ip(const std::string& text);

// Version comparison: true when a >= b ("0.4.0" >= "0.3.1").
bool version_at_least(const std::string& a, const std::string& b);

}  // namespace shmipam::cni
