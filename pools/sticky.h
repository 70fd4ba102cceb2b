// Who keeps an address by name (fixed addresses, docs/fixed-ips.md): a StatefulSet pod by its
// pod name, a KubeVirt VM's launcher pod by its VM name, when the config or the pod asks; and
// how long an idle claim is kept. Pure functions over the pod's facts, as Kubernetes gives
// them; what a claim does to an arena is the engine's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"
#include "pools/pod_facts.h"

namespace shmipam::pools {

// The annotations and labels the rules read. The ucloud names are the fixed-IP design
// document's, accepted so its users can move over; where both are set, shmipam's wins.
inline constexpr const char* kStaticIpAnnotation = "ipam.shmipam.io/static-ip";
inline constexpr const char* kStaticIpAlias =
    "network.beta.kubernetes.io/ucloud-statefulset-static-ip";
inline constexpr const char* kClaimPolicyAnnotation = "ipam.shmipam.io/ip-claim-policy";
inline constexpr const char* kClaimPolicyAlias =
    "network.beta.kubernetes.io/ucloud-statefulset-ip-claim-policy";
inline constexpr const char* kStatefulSetPodNameLabel = "statefulset.kubernetes.io/pod-name";
inline constexpr const char* kKubeVirtVmLabel = "vm.kubevirt.io/name";

enum class StickyKind { kStatefulSet, kKubeVirt };

// The name an address is claimed for: one claim per namespace, pod (or VM) name and interface;
// it holds the address of each family the pod is given.
struct StickyIdentity {
    StickyKind kind = StickyKind::kStatefulSet;
    std::string namespace_;
    std::string name;  // the pod's name, or the VM's
    std::string ifname;

    // "sts:<namespace>/<pod>/<ifname>" or "vm:<namespace>/<vm>/<ifname>" (Kubernetes names
    // hold neither ':' nor '/', so two identities never share a key).
    std::string key() const;
    // "<namespace>/<name>", as an operator names the claim (shmipamctl release --claim).
    std::string display() const;
};

// The pod's sticky identity, or nullopt for an ordinary pod. A pod is sticky when its annotation
// says "true", or, without the annotation, when the config's statefulSetFixedIP does; "false"
// opts a pod out. Only a StatefulSet pod (label statefulset.kubernetes.io/pod-name equal to its
// name) or a KubeVirt launcher pod (label vm.kubevirt.io/name) can be: one that asks by
// annotation and is neither is an error (120) that says so, as the design document requires; the
// config's switch alone leaves other pods ordinary. An annotation that is not a boolean is an
// error too.
Expected<std::optional<StickyIdentity>> sticky_identity(const PodFacts& pod, bool config_fixed_ip);

// How long a claim whose address nobody uses is kept.
struct ClaimPolicy {
    enum class Kind { kNever, kAtDelete, kAfterIdle };
    Kind kind = Kind::kNever;
    int64_t idle_seconds = 0;  // kAfterIdle: kept this long after the DEL that left it idle

    bool operator==(const ClaimPolicy&) const = default;
};

// The policy annotation: absent or empty = never reclaim; "0" = free at DEL; a whole number N =
// N hours; a duration with units, as Kubernetes and Go write them ("90m", "48h", "1h30m",
// "5s"). Anything else (a negative or fractional number, an unknown unit, more than 100 years)
// is an error (120) that quotes the value.
Expected<ClaimPolicy> claim_policy(const PodFacts& pod);

// The policy for tools: "never", "at DEL", or the idle time kept, as "1h30m idle".
std::string describe(const ClaimPolicy& p);

}  // namespace shmipam::pools
