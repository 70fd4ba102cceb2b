// Whether an ADD is for a fixed address (docs/fixed-ips.md): the pod's facts through the rules of
// pools/sticky.h, turned into the engine's fixed claim.
#pragma once

#include <optional>

#include "base/status.h"
#include "engine/ops/allocator.h"
#include "ipam/request.h"
#include "pools/sticky.h"

namespace shmipam::ipam {

// The pod's facts as the rules read them (pools/pod_facts.h).
pools::PodFacts pod_facts(const Request& r);

// How the config and the API's facts let pods keep a name (pools/sticky.h).
pools::StickyRules sticky_rules(const Request& r);

// Whether the pod keeps its address by the StatefulSet default alone (in cluster mode, only in
// the fixed-address pools: elsewhere a sticky address would pin its block to one node).
bool claim_by_default(const Request& r);

// What the engine keeps of a reclaim policy (format.h, ClaimFields::keep_idle): the one mapping
// both the plugin's claims and an operator's (shmipamctl claims create) use.
uint64_t keep_idle_of(const pools::ClaimPolicy& policy);

// The fixed claim this ADD's addresses are held by, or nullopt for an ordinary pod. An error
// (120) when the pod asks for a static address it cannot have, or its policy cannot be read.
Expected<std::optional<engine::ClaimSpec>> fixed_claim_of(const Request& r);

}  // namespace shmipam::ipam
