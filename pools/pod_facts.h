// What the selection rules know about the pod and the call, gathered without a daemon: the
// pod's identity from CNI_ARGS, its annotations from runtimeConfig
// `io.kubernetes.cri.pod-annotations`, its labels from `args.cni.labels`, the node from the
// config; with the API server configured, the labels, the rest of the annotations and the
// controller read from the pod itself (docs/kubernetes.md); and the CNI config's own pool knobs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pools/objects.h"

namespace shmipam::pools {

// The pod's controller: its ownerReference with `controller: true`.
struct Controller {
    std::string api_version;  // "apps/v1"
    std::string kind;         // "StatefulSet"
    std::string name;
};

struct PodFacts {
    std::string namespace_;
    std::string name;
    std::string uid;
    Labels annotations;
    Labels labels;
    std::string node_name;
    std::string ifname;  // the interface being added (CNI_IFNAME)
    // Read from the API server: then `controller` is known (none: a bare pod) and the labels are
    // the pod's own; otherwise only what the runtime passed is known.
    bool from_api = false;
    std::optional<Controller> controller;
};

// The pool settings of the CNI config (Spiderpool's names).
struct PoolConfig {
    std::vector<std::string> default_ipv4_ippool;
    std::vector<std::string> default_ipv6_ippool;
    bool clean_gateway = false;
    // A bare multusName (and a default network without a namespace) lives here.
    std::string multus_namespace = "kube-system";
    // The cluster's default network as Multus names it ("ns/name" or "name"), for the first
    // interface when the pod has no `v1.multus-cni.io/default-network` annotation.
    std::string multus_cluster_network;
};

// The annotation keys, as Spiderpool and Multus spell them.
namespace annotation {
inline constexpr const char* kSubnets = "ipam.spidernet.io/subnets";
inline constexpr const char* kSubnet = "ipam.spidernet.io/subnet";
inline constexpr const char* kIpPools = "ipam.spidernet.io/ippools";
inline constexpr const char* kIpPool = "ipam.spidernet.io/ippool";
inline constexpr const char* kRoutes = "ipam.spidernet.io/routes";
inline constexpr const char* kNsDefaultV4 = "ipam.spidernet.io/default-ipv4-ippool";
inline constexpr const char* kNsDefaultV6 = "ipam.spidernet.io/default-ipv6-ippool";
inline constexpr const char* kNsDefaultV4Old = "ipam.spidernet.io/defaultv4ippool";
inline constexpr const char* kNsDefaultV6Old = "ipam.spidernet.io/defaultv6ippool";
inline constexpr const char* kMultusDefaultNetwork = "v1.multus-cni.io/default-network";
inline constexpr const char* kMultusNetworks = "k8s.v1.cni.cncf.io/networks";
}  // namespace annotation

}  // namespace shmipam::pools
