// The network configuration on stdin: the whole parent config, of which shmipam reads the
// top-level cniVersion / name / args / runtimeConfig / prevResult and its own "ipam" section.
// Every host-local field is accepted with host-local's meaning; unknown fields are ignored.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/ops/allocator.h"
#include "engine/state/network_config.h"
#include "ipam/kubernetes_config.h"
#include "ipam/pool_config.h"
#include "plugin/cni_args.h"
#include "pools/pod_facts.h"

namespace shmipam::cni {

inline const std::vector<std::string>& supported_versions() {
    static const std::vector<std::string> v{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"};
    return v;
}

struct NetConf {
    std::string cni_version;
    engine::NetworkConfig network;
    nlohmann::json routes = nlohmann::json::array();
    std::string resolv_conf;
    std::vector<std::string> requested_ips;  // highest-precedence source, as written
    nlohmann::json prev_result;              // CHECK
    std::optional<std::vector<engine::AttachmentKey>> valid_attachments;  // GC
    std::optional<ipam::PoolMode> pool_mode;  // ipam.poolsDir (ipam/pool_config.h)
    pools::Labels pod_annotations;            // runtimeConfig "io.kubernetes.cri.pod-annotations"
    pools::Labels pod_labels;                 // args.cni.labels ([{key, value}], CNI conventions)
    bool statefulset_fixed_ip = false;        // ipam.statefulSetFixedIP (docs/fixed-ips.md)
    std::optional<ipam::KubernetesApi> kubernetes;  // ipam.kubernetes (ipam/kubernetes_config.h)
};

// Just the version, for error output and the version gate (code 1 when unsupported).
Expected<std::string> read_cni_version(const nlohmann::json& doc);

// Decodes and validates. Code 6 for wrong JSON types, 7 for invalid values.
Expected<NetConf> parse_netconf(const nlohmann::json& doc, const CniArgs& args);

// Parses a requested address ("10.1.2.3" or "10.1.2.3/24").
Expected<engine::IpAddress> parse_requested_ip(const std::string& text);

// Version comparison: true when a >= b ("0.4.0" >= "0.3.1").
bool version_at_least(const std::string& a, const std::string& b);

}  // namespace shmipam::cni
