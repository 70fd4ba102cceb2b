// Who keeps an address by name (fixed addresses, docs/fixed-ips.md): a StatefulSet pod by its
// pod name, a KubeVirt VM's launcher pod by its VM name, when the config or the pod asks; and
// how long an idle claim is kept. Pure functions over the pod's facts, as Kubernetes gives
// them; what a claim does to an arena is the engine's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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

// The API group and kinds of the controllers that give a pod a name that outlives it.
inline constexpr const char* kStatefulSetApiGroup = "apps";
inline constexpr const char* kStatefulSetKind = "StatefulSet";
inline constexpr const char* kKubeVirtApiGroup = "kubevirt.io";
inline constexpr const char* kKubeVirtVmiKind = "VirtualMachineInstance";
// KubeVirt names a VM's launcher pod "virt-launcher-<vm>-<5 characters>".
inline constexpr std::string_view kKubeVirtLauncherPrefix = "virt-launcher-";

enum class StickyKind { kStatefulSet, kKubeVirt };

// The name an address is claimed for: one claim per namespace, pod (or VM) name and interface;
// it holds the address of each family the pod is given.
struct StickyIdentity {
    StickyKind kind = StickyKind::kStatefulSet;
    std::string namespace_;
    std::string name;  // the pod's name, or the VM's
    std::string ifname;
    // Kept by the StatefulSet default alone (no annotation, no ipam.statefulSetFixedIP): its
    // claim lasts while the StatefulSet wants the pod, unless a policy annotation says otherwise.
    bool by_default = false;

    // "sts:<namespace>/<pod>/<ifname>" or "vm:<namespace>/<vm>/<ifname>" (Kubernetes names
    // hold neither ':' nor '/', so two identities never share a key).
    std::string key() const;
    // "<namespace>/<name>", as an operator names the claim (shmipamctl release --claim).
    std::string display() const;
};

// The identity `key()` made, or nullopt for text that is not one. A key longer than the claim
// entry keeps (72 bytes) comes back truncated from a claim; the caller compares lengths.
std::optional<StickyIdentity> identity_of_key(std::string_view key);

// What the config asks of pods that can keep a name.
struct StickyRules {
    bool config_fixed_ip = false;  // ipam.statefulSetFixedIP: every such pod, policy "never"
    // A StatefulSet pod known from the API server keeps its address unasked (pool mode with
    // ipam.kubernetes, unless ipam.statefulSetFixedIPByDefault is false: docs/fixed-ips.md).
    bool statefulset_default = false;
};

// What the pod's static-ip annotation says (shmipam's wins over the alias; read as
// sticky_identity reads it): absent, "true", "false", or no boolean (sticky_identity refuses it).
enum class StaticIpAsked { kAbsent, kYes, kNo, kMalformed };
StaticIpAsked static_ip_asked(const PodFacts& pod);

// The pod's sticky identity, or nullopt for an ordinary pod. A pod is sticky when its annotation
// says "true", or, without the annotation, when the config's statefulSetFixedIP does, or the
// StatefulSet default applies; "false" opts a pod out. Only a StatefulSet pod or a KubeVirt
// launcher pod can be. Read from the API server, that is its controller (a StatefulSet whose
// name and an ordinal make the pod's; a VirtualMachineInstance, or the label vm.kubevirt.io/name);
// otherwise the labels the runtime passed (statefulset.kubernetes.io/pod-name equal to its name,
// vm.kubevirt.io/name). One that asks by annotation and is neither is an error (120) that says
// so, as the design document requires; the config's switch alone leaves other pods ordinary. An
// annotation that is not a boolean is an error too.
Expected<std::optional<StickyIdentity>> sticky_identity(const PodFacts& pod,
                                                        const StickyRules& rules);

// How the StatefulSet controller names its pods: "<set>-<ordinal>", the ordinal in decimal
// without a leading zero. nullopt: the name cannot be a StatefulSet pod's (such a pod is known
// not to be one without asking the API server).
struct SetMember {
    std::string set;
    int64_t ordinal = 0;
};
std::optional<SetMember> statefulset_member(std::string_view pod_name);

// A StatefulSet as the API server gives it.
struct SetState {
    bool exists = false;
    bool deleting = false;       // metadata.deletionTimestamp
    int64_t ordinals_start = 0;  // spec.ordinals.start
    int64_t replicas = 1;        // spec.replicas
};
// Whether the set still wants its pod of `ordinal`: it exists, is not being deleted, and its
// ordinals [start, start + replicas) cover it.
bool statefulset_wants(const SetState& set, int64_t ordinal);

// How long a claim whose address nobody uses is kept.
struct ClaimPolicy {
    // kWhileOwnerWants: freed once its owner no longer wants the name: the StatefulSet default's
    // (the set no longer covers the pod's ordinal), and a KubeVirt VM's default (the
    // VirtualMachine is gone or being deleted).
    enum class Kind { kNever, kAtDelete, kAfterIdle, kWhileOwnerWants };
    Kind kind = Kind::kNever;
    int64_t idle_seconds = 0;  // kAfterIdle: kept this long after the DEL that left it idle

    bool operator==(const ClaimPolicy&) const = default;
};

// The policy annotation: absent or empty = never reclaim (with `owner_default`: while its owner
// wants it, for an identity kept by the StatefulSet default and for a KubeVirt VM's with the
// API server configured: owner_default_applies); "0" = free at DEL; a whole number N = N hours; a
// duration with units, as Kubernetes and Go write them ("90m", "48h", "1h30m", "5s"). Anything else
// (a negative or fractional number, an unknown unit, more than 100 years) is an error (120) that
// quotes the value.
Expected<ClaimPolicy> claim_policy(const PodFacts& pod, bool owner_default = false);

// Whether an identity's claim is kept while its owner wants it when no policy annotation says
// otherwise: a StatefulSet pod kept by the default alone, and a KubeVirt VM's launcher pod
// whenever the API server can be asked whether the VM exists (`api`: ipam.kubernetes is set).
bool owner_default_applies(const StickyIdentity& id, bool api);

// The policy for tools: "never", "at DEL", "while its StatefulSet wants it" (for a VM's claim:
// "while its VM exists"), or the idle time kept, as "1h30m idle".
std::string describe(const ClaimPolicy& p, StickyKind owner = StickyKind::kStatefulSet);

// The VM a KubeVirt launcher pod runs, from its name as KubeVirt makes it
// ("virt-launcher-<vm>-<5 characters>"), or nullopt for a name not of that form. For the DEL,
// which reads no pod from the API server: a claim found under that name is the VM's.
std::optional<std::string> launcher_vm_name(std::string_view pod_name);

}  // namespace shmipam::pools
