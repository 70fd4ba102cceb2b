#include "ipam/fixed_claim.h"

#include "pools/sticky.h"

namespace shmipam::ipam {

pools::PodFacts pod_facts(const Request& r) {
    pools::PodFacts f;
    f.namespace_ = r.pod.namespace_;
    f.name = r.pod.name;
    f.uid = r.pod.uid;
    f.annotations = r.pod.annotations;
    f.labels = r.pod.labels;
    if (r.pools) f.node_name = r.pools->node_name;
    f.ifname = r.key.ifname;
    f.from_api = r.pod.from_api;
    f.controller = r.pod.controller;
    return f;
}

pools::StickyRules sticky_rules(const Request& r) {
    // The StatefulSet default needs the pod's controller, known only from the API server; pool
    // mode only (ranges mode keeps host-local's behaviour: fixed addresses are opt-in).
    const bool by_default =
        r.pod.from_api && r.pools && r.kubernetes && r.kubernetes->statefulset_default;
    return pools::StickyRules{r.statefulset_fixed_ip, by_default};
}

bool claim_by_default(const Request& r) {
    const pools::StickyRules rules = sticky_rules(r);
    if (!rules.statefulset_default) return false;
    auto who = pools::sticky_identity(pod_facts(r), rules);
    return who && *who && (*who)->by_default;
}

uint64_t keep_idle_of(const pools::ClaimPolicy& policy) {
    switch (policy.kind) {
        case pools::ClaimPolicy::Kind::kNever:
            break;
        case pools::ClaimPolicy::Kind::kAtDelete:
            return format::kKeepIdleNone;
        case pools::ClaimPolicy::Kind::kAfterIdle:
            return uint64_t(policy.idle_seconds) + 1;
        case pools::ClaimPolicy::Kind::kWhileOwnerWants:
            return format::kKeepIdleWhileOwnerWants;
    }
    return format::kKeepIdleForever;
}

Expected<std::optional<engine::ClaimSpec>> fixed_claim_of(const Request& r) {
    const pools::StickyRules rules = sticky_rules(r);
    // Ordinary pods, the common case, decide on two lookups.
    if (!rules.config_fixed_ip && !rules.statefulset_default &&
        !r.pod.annotations.contains(pools::kStaticIpAnnotation) &&
        !r.pod.annotations.contains(pools::kStaticIpAlias)) {
        return std::optional<engine::ClaimSpec>{};
    }
    const pools::PodFacts facts = pod_facts(r);
    auto who = pools::sticky_identity(facts, rules);
    if (!who) return who.error();
    if (!*who) return std::optional<engine::ClaimSpec>{};
    auto policy =
        pools::claim_policy(facts, pools::owner_default_applies(**who, r.kubernetes.has_value()));
    if (!policy) return policy.error();
    engine::ClaimSpec spec{(*who)->key(), keep_idle_of(*policy)};
    return std::optional<engine::ClaimSpec>{std::move(spec)};
}

}  // namespace shmipam::ipam
