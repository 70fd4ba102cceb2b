// The ipam config's Kubernetes part (docs/kubernetes.md): where the API server is, so that an ADD
// can read the pod facts no runtime passes (labels, controller), and how StatefulSet pods keep
// their addresses.
//
//   "ipam": {..., "kubernetes": {"kubeconfig": "/etc/cni/net.d/shmipam.d/shmipam-kubeconfig",
//            "budgetMs": 2000, "connectTimeoutMs": 1000, "helper": "/opt/cni/bin/shmipam-kube"},
//            "statefulSetFixedIPByDefault": true, "statefulSetRecheckS": 60}
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/status.h"
#include "kube/pod_protocol.h"

namespace shmipam::ipam {

// How often, at most, the claims StatefulSet pods left idle are checked against their sets.
inline constexpr uint64_t kDefaultStatefulSetRecheckS = 60;

struct KubernetesApi {
    std::string kubeconfig;  // ipam.kubernetes.kubeconfig: Calico's key
    uint64_t budget_ms = 0;  // ipam.kubernetes.budgetMs: the whole read (kube/pod_protocol.h)
    uint64_t connect_timeout_ms = 0;  // ipam.kubernetes.connectTimeoutMs: each connection's
    std::string helper;               // ipam.kubernetes.helper, else shmipam-kube beside the plugin
    kube::protocol::Api api() const { return {kubeconfig, budget_ms, connect_timeout_ms}; }
    // ipam.statefulSetFixedIPByDefault: in pool mode a StatefulSet pod keeps its address without
    // asking, while its set wants it (docs/fixed-ips.md). Read only with the API configured.
    bool statefulset_default = true;
    uint64_t recheck_s = kDefaultStatefulSetRecheckS;  // ipam.statefulSetRecheckS
};

// nullopt without ipam.kubernetes; code 7 when it lacks its kubeconfig. Code 7 naming a field of
// the wrong type or value.
Expected<std::optional<KubernetesApi>> parse_kubernetes(const nlohmann::json& ipam);

}  // namespace shmipam::ipam
