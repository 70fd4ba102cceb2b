// The protocol between the plugin and the Kubernetes helper (shmipam-kube), used by both sides
// (docs/kubernetes.md). No Kubernetes runtime passes a pod's labels or owner to a CNI plugin;
// an ADD that needs them execs the helper, which reads the pod from the API server through a
// kubeconfig (Calico's convention) and answers on its stdout. The plugin links no HTTPS client.
//
//   {"version": 2, "op": "read-pod", "kubeconfig": "/etc/cni/net.d/shmipam.d/kubeconfig",
//    "budgetMs": 2000, "connectTimeoutMs": 1000, "namespace": "default", "name": "web-0"}
//   {"version": 2, "op": "read-statefulsets", "kubeconfig": "...", "budgetMs": 2000,
//    "sets": [{"namespace": "default", "name": "web"}],
//    "pods": [{"namespace": "default", "name": "web-0"}],
//    "vms": [{"namespace": "default", "name": "vm1"}]}
//   {"version": 2, "op": "request-token", "kubeconfig": "...", "budgetMs": 10000,
//    "namespace": "kube-system", "serviceAccount": "shmipam", "expirationSeconds": 86400}
// (the last for shmipamctl kubeconfig: kube/token_request.h)
//
// The envelope (the version and op, the error answer, the field readers, the helper's main) is
// base/helper_envelope.h's, shared with the cluster helper's protocol: a helper refuses a request
// of another version or an op it does not know (code 1). An answer is the op's answer struct, or
// an error {"code", "msg", "details"} (exit status 1):
//   7  the kubeconfig cannot be read or used (names the file and what is wrong; TLS that fails
//      on its CA or client certificate included), or the API server refused the verb (401/403:
//      names the kubeconfig, the verb and the resource);
//   11 the API server is unreachable, timed out within the budget, answered 5xx, or the pod is
//      not (or no longer) there: try again later;
//   999 an answer no API server gives (an object other than the one asked, another status).
// The message names the URL and what failed.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/helper_envelope.h"
#include "base/status.h"

namespace shmipam::kube::protocol {

// Bumped whenever a field's meaning changes or an op is added or removed.
inline constexpr int kVersion = 2;
// This protocol's envelope (base/helper_envelope.h).
inline constexpr base::envelope::Protocol kProtocol{
    "the Kubernetes helper", kVersion, "install the plugin and its helpers from one release"};
// ipam.kubernetes.budgetMs when the config leaves it out: the whole call, connection included.
inline constexpr uint64_t kDefaultBudgetMs = 2000;
// ipam.kubernetes.connectTimeoutMs when the config leaves it out: how long a connection (TCP and
// TLS handshakes) may take before the run gives up on the address, within the budget. Linux
// resends an unanswered SYN after 1 s, so this admits an API server that answers at all, and a
// black-holed address (a control plane being replaced) costs the ADD this much, not the budget.
inline constexpr uint64_t kDefaultConnectTimeoutMs = 1000;

// The details of an error (code 11) that means the API server gave no usable answer at all:
// unreachable, no connection or answer within the connect timeout or budget, 429 or 5xx, a
// proxy's page. What an ADD may do without the API server keys on it (ipam/offline_claim.h);
// a refusal, a pod not there, or a pod of another uid never carries it.
inline constexpr const char* kApiUnavailableDetails =
    "no answer from the API server: unreachable, timed out or unavailable";

using StringMap = std::map<std::string, std::string>;

// Where the API server is and how long one request may take.
struct Api {
    std::string kubeconfig;  // a path; read through its current context
    uint64_t budget_ms = kDefaultBudgetMs;
    uint64_t connect_timeout_ms = kDefaultConnectTimeoutMs;  // at most the budget in effect
};

// GET /api/v1/namespaces/NS/pods/NAME.
struct ReadPod {
    Api api;
    std::string namespace_, name;
};

struct ObjectRef {
    std::string namespace_, name;
};
// GET /apis/apps/v1/namespaces/NS/statefulsets/NAME for each set, then
// GET /api/v1/namespaces/NS/pods/NAME for each pod, then
// GET /apis/kubevirt.io/v1/namespaces/NS/virtualmachines/NAME for each VM (not found is an
// answer): whether a set still wants its pods, where those pods run now, and whether a VM
// still exists. The owners of the claims a recheck looks at, read in one helper run.
struct ReadStatefulSets {
    Api api;
    std::vector<ObjectRef> sets;
    std::vector<ObjectRef> pods;
    std::vector<ObjectRef> vms;
};

// POST /api/v1/namespaces/NS/serviceaccounts/NAME/token (TokenRequest).
struct RequestToken {
    Api api;
    std::string namespace_, service_account;
    int64_t expiration_seconds = 0;
};

using Request = std::variant<ReadPod, ReadStatefulSets, RequestToken>;

std::string encode(const Request& r);
// Code 6 for text that is not a JSON object, 1 for another version or an unknown op, 7 for a
// field missing or of the wrong type (naming it). Never throws.
Expected<Request> decode(std::string_view text);

// metadata.ownerReferences[i].
struct OwnerReference {
    std::string api_version, kind, name, uid;
    bool controller = false;
};

// What the plugin reads of a pod.
struct PodAnswer {
    std::string uid;        // metadata.uid
    std::string node_name;  // spec.nodeName
    StringMap labels, annotations;
    std::vector<OwnerReference> owners;
};

// What the plugin reads of a StatefulSet: whether it still wants the pods of ordinals
// [ordinals_start, ordinals_start + replicas).
struct StatefulSetAnswer {
    std::string namespace_, name;
    bool exists = false;
    bool deleting = false;       // metadata.deletionTimestamp set
    int64_t ordinals_start = 0;  // spec.ordinals.start (0 when absent)
    int64_t replicas = 1;        // spec.replicas (1 when absent, as the API defaults it)
};
// Where a StatefulSet's pod is now.
struct PodPlacement {
    std::string namespace_, name;
    bool exists = false;
    std::string node_name;  // spec.nodeName; "" while not scheduled
};
// Whether a KubeVirt VirtualMachine still exists.
struct VmAnswer {
    std::string namespace_, name;
    bool exists = false;
    bool deleting = false;  // metadata.deletionTimestamp set
};
struct StatefulSetsAnswer {
    std::vector<StatefulSetAnswer> sets;  // one per asked set, in the order asked
    std::vector<PodPlacement> pods;       // one per asked pod, in the order asked
    std::vector<VmAnswer> vms;            // one per asked VM, in the order asked
};

// The token TokenRequest issued.
struct TokenAnswer {
    std::string token;
    int64_t expires_at = 0;  // Unix seconds
};

nlohmann::json to_json(const PodAnswer& a);
nlohmann::json to_json(const TokenAnswer& a);
nlohmann::json to_json(const StatefulSetsAnswer& a);

// The helper's stdout as the op's answer, or the error it answered (its code), or code 999
// naming what did not parse. Never throw.
Expected<PodAnswer> pod_answer(std::string_view text);
Expected<StatefulSetsAnswer> statefulsets_answer(std::string_view text);
Expected<TokenAnswer> token_answer(std::string_view text);

}  // namespace shmipam::kube::protocol
