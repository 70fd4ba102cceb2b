#include "ipam/pod_lookup.h"

#include "ipam/fixed_claim.h"
#include "ipam/helper_exec.h"
#include "kube/pod_protocol.h"
#include "pools/selection.h"
#include "pools/sticky.h"

namespace shmipam::ipam {

namespace {

// The kubelet marks every pod it runs with where it came from ("api"; "file" or "http" for a
// static pod), and the runtime passes the pod's annotations on: a static pod is no StatefulSet's
// nor KubeVirt's, whatever its name ("<name>-<node>" on a node "worker-1" looks like an ordinal).
constexpr const char* kConfigSourceAnnotation = "kubernetes.io/config.source";
constexpr const char* kConfigSourceApi = "api";
// The API server's mirror of a static pod has a uid of its own; the kubelet's uid (the one it
// passes as K8S_POD_UID) is in this annotation of the mirror.
constexpr const char* kConfigMirrorAnnotation = "kubernetes.io/config.mirror";

bool static_pod(const Request& r) {
    auto it = r.pod.annotations.find(kConfigSourceAnnotation);
    return it != r.pod.annotations.end() && it->second != kConfigSourceApi;
}

bool any_candidate_has_pod_affinity(const Request& r, const pools::Catalog& catalog) {
    const pools::Selection sel = pools::select_pools(catalog, pod_facts(r), r.pools->config);
    for (const pools::FamilyPlan& fam : sel.families) {
        for (const std::string& name : fam.named) {
            const pools::IpPool* pool = catalog.pool(name);
            if (pool != nullptr && pool->pod_affinity) return true;
        }
    }
    return false;
}

// Whether the pod could keep an address by name, as far as its call tells. The annotation
// decides when it is there: "true" needs the controller (is it a StatefulSet's or a VM's?),
// "false" opts out, anything else is refused without asking (pools/sticky.h). A static pod
// keeps none. Otherwise its name decides (pools/sticky.h's statefulset_member).
bool could_keep_a_name(const Request& r) {
    switch (pools::static_ip_asked(pod_facts(r))) {
        case pools::StaticIpAsked::kYes:
            return true;
        case pools::StaticIpAsked::kNo:
        case pools::StaticIpAsked::kMalformed:
            return false;
        case pools::StaticIpAsked::kAbsent:
            break;
    }
    if (static_pod(r)) return false;
    const bool sts_name = pools::statefulset_member(r.pod.name).has_value();
    if (r.statefulset_fixed_ip) {
        return sts_name || std::string_view(r.pod.name).starts_with(pools::kKubeVirtLauncherPrefix);
    }
    // The default: pool mode only (ranges mode keeps host-local's behaviour: opt-in).
    return r.pools && r.kubernetes->statefulset_default && sts_name;
}

}  // namespace

std::string kube_helper_path(const KubernetesApi& api) {
    return api.helper.empty() ? helper_beside_plugin("shmipam-kube") : api.helper;
}

bool needs_pod_from_api(const Request& r, const pools::Catalog* catalog) {
    if (!r.kubernetes || r.pod.from_api || r.pod.name.empty() || r.pod.namespace_.empty()) {
        return false;
    }
    if (could_keep_a_name(r)) return true;
    return catalog != nullptr && r.pools && any_candidate_has_pod_affinity(r, *catalog);
}

Expected<Request> with_pod_from_api(const Request& r) {
    namespace protocol = kube::protocol;
    const protocol::ReadPod ask{r.kubernetes->api(), r.pod.namespace_, r.pod.name};
    auto out = run_helper(kube_helper_path(*r.kubernetes), protocol::encode(ask), -1,
                          "ipam.kubernetes.helper");
    if (!out) return out.error();
    auto pod = protocol::pod_answer(*out);
    if (!pod) return pod.error();
    const auto mirror = pod->annotations.find(kConfigMirrorAnnotation);
    const bool mirror_of_this_pod =
        mirror != pod->annotations.end() && !r.pod.uid.empty() && mirror->second == r.pod.uid;
    if (!r.pod.uid.empty() && pod->uid != r.pod.uid && !mirror_of_this_pod) {
        return make_error(Code::kTryAgainLater,
                          "pod " + r.pod.namespace_ + "/" + r.pod.name +
                              " in the API server has "
                              "uid " +
                              pod->uid + ", not this sandbox's " + r.pod.uid +
                              " (K8S_POD_UID): the pod was re-created meanwhile",
                          "the runtime's retry reads the pod again");
    }
    Request completed = r;
    completed.pod.from_api = true;
    completed.pod.labels = pools::Labels(pod->labels.begin(), pod->labels.end());
    for (const auto& [k, v] : pod->annotations) completed.pod.annotations.emplace(k, v);
    for (const auto& o : pod->owners) {
        if (o.controller)
            completed.pod.controller = pools::Controller{o.api_version, o.kind, o.name};
    }
    return completed;
}

}  // namespace shmipam::ipam
