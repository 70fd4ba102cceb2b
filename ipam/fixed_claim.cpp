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
    return f;
}

Expected<std::optional<engine::ClaimSpec>> fixed_claim_of(const Request& r) {
    // Ordinary pods, the common case, decide on two lookups.
    if (!r.statefulset_fixed_ip && !r.pod.annotations.contains(pools::kStaticIpAnnotation) &&
        !r.pod.annotations.contains(pools::kStaticIpAlias)) {
        return std::optional<engine::ClaimSpec>{};
    }
    const pools::PodFacts facts = pod_facts(r);
    auto who = pools::sticky_identity(facts, r.statefulset_fixed_ip);
    if (!who) return who.error();
    if (!*who) return std::optional<engine::ClaimSpec>{};
    auto policy = pools::claim_policy(facts);
    if (!policy) return policy.error();
    engine::ClaimSpec spec{(*who)->key(), format::kKeepIdleForever};
    switch (policy->kind) {
        case pools::ClaimPolicy::Kind::kNever:
            break;
        case pools::ClaimPolicy::Kind::kAtDelete:
            spec.keep_idle = format::kKeepIdleNone;
            break;
        case pools::ClaimPolicy::Kind::kAfterIdle:
            spec.keep_idle = uint64_t(policy->idle_seconds) + 1;
            break;
    }
    return std::optional<engine::ClaimSpec>{std::move(spec)};
}

}  // namespace shmipam::ipam
