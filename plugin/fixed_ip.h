// Whether an ADD is for a fixed address (docs/fixed-ips.md): the pod's facts through the rules of
// pools/sticky.h, turned into the engine's claim.
#pragma once

#include <optional>

#include "base/status.h"
#include "engine/ops/allocator.h"
#include "plugin/cni_args.h"
#include "plugin/cni_env.h"
#include "plugin/netconf.h"

namespace shmipam::cni {

// The pod's facts as the rules read them (pools/pod_facts.h), from the runtime's CNI_ARGS and
// the config's pod metadata.
pools::PodFacts pod_facts(const CniEnv& env, const NetConf& nc, const CniArgs& args);

// The claim this ADD's addresses are held by, or nullopt for an ordinary pod. An error (120)
// when the pod asks for a static address it cannot have, or its policy cannot be read.
Expected<std::optional<engine::ClaimSpec>> fixed_ip_claim(const CniEnv& env, const NetConf& nc,
                                                          const CniArgs& args);

}  // namespace shmipam::cni
