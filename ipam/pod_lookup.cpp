#include "ipam/pod_lookup.h"

#include "ipam/fixed_claim.h"
#include "ipam/helper_exec.h"
#include "kube/pod_protocol.h"
#include "pools/selection.h"
#include "pools/sticky.h"

namespace shmipam::ipam {

namespace {

// KubeVirt names a VM's launcher pod "virt-launcher-<vm>-<suffix>".
constexpr std::string_view kKubeVirtLauncherPrefix = "virt-launcher-";

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

bool could_keep_a_name(const Request& r) {
    if (r.pod.annotations.contains(pools::kStaticIpAnnotation) ||
        r.pod.annotations.contains(pools::kStaticIpAlias)) {
        return true;
    }
    const bool sts_name = pools::statefulset_member(r.pod.name).has_value();
    if (r.statefulset_fixed_ip) {
        return sts_name || std::string_view(r.pod.name).starts_with(kKubeVirtLauncherPrefix);
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
    const protocol::ReadPod ask{{r.kubernetes->kubeconfig, r.kubernetes->budget_ms},
                                r.pod.namespace_,
                                r.pod.name};
    auto out = run_helper(kube_helper_path(*r.kubernetes), protocol::encode(ask), -1,
                          "ipam.kubernetes.helper");
    if (!out) return out.error();
    auto pod = protocol::pod_answer(*out);
    if (!pod) return pod.error();
    if (!r.pod.uid.empty() && pod->uid != r.pod.uid) {
        return make_error(Code::kTryAgainLater,
                          "pod " + r.pod.namespace_ + "/" + r.pod.name + " in the API server has "
                              "uid " + pod->uid + ", not this sandbox's " + r.pod.uid +
                              " (K8S_POD_UID): the pod was re-created meanwhile",
                          "the runtime's retry reads the pod again");
    }
    Request completed = r;
    completed.pod.from_api = true;
    completed.pod.labels = pools::Labels(pod->labels.begin(), pod->labels.end());
    for (const auto& [k, v] : pod->annotations) completed.pod.annotations.emplace(k, v);
    for (const auto& o : pod->owners) {
        if (o.controller) completed.pod.controller = pools::Controller{o.api_version, o.kind, o.name};
    }
    return completed;
}

}  // namespace shmipam::ipam
