#include "plugin/fixed_ip.h"

#include "pools/sticky.h"

namespace shmipam::cni {

pools::PodFacts pod_facts(const CniEnv& env, const NetConf& nc, const CniArgs& args) {
    pools::PodFacts f;
    f.namespace_ = args.pod_namespace;
    f.name = args.pod_name;
    f.uid = args.pod_uid;
    f.annotations = nc.pod_annotations;
    f.labels = nc.pod_labels;
    if (nc.pool_mode) f.node_name = nc.pool_mode->node_name;
    f.ifname = env.ifname;
    return f;
}

Expected<std::optional<engine::ClaimSpec>> fixed_ip_claim(const CniEnv& env, const NetConf& nc,
                                                          const CniArgs& args) {
    // Ordinary pods, the common case, decide on two lookups.
    if (!nc.statefulset_fixed_ip && !nc.pod_annotations.contains(pools::kStaticIpAnnotation) &&
        !nc.pod_annotations.contains(pools::kStaticIpAlias)) {
        return std::optional<engine::ClaimSpec>{};
    }
    const pools::PodFacts facts = pod_facts(env, nc, args);
    auto who = pools::sticky_identity(facts, nc.statefulset_fixed_ip);
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

}  // namespace shmipam::cni
