// Which pools an interface of a pod may take its addresses from, in which order, following
// Spiderpool's rules (docs/pools.md):
//   1. candidates: the first rule that applies, for both families, never merged with another:
//      subnet annotations > pool annotations > namespace defaults > the CNI config's defaults >
//      pools with `default: true`;
//   2. filters, in Spiderpool's order: terminating, disabled, IP version, nodeName (else
//      nodeAffinity), namespaceName (else namespaceAffinity), podAffinity, multusName; then a
//      pool whose every address is excluded, or reserved;
//   3. a stable sort by affinity: podAffinity > nodeName > nodeAffinity > namespaceName >
//      namespaceAffinity > multusName.
// Pure: everything it reads is in its arguments. Exhaustion is the allocator's to find; the
// plugin tries the pools in this order and falls through past an exhausted one.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "pools/catalog.h"
#include "pools/pod_facts.h"

namespace shmipam::pools {

enum class Rule {
    kSubnetsAnnotation,
    kSubnetAnnotation,
    kIpPoolsAnnotation,
    kIpPoolAnnotation,
    kNamespaceDefault,
    kConfigDefault,
    kClusterDefault,
};
std::string describe(Rule rule);            // "pod annotation ipam.spidernet.io/ippool", ...
std::string family_name(engine::Family f);  // "IPv4", "IPv6"
std::string go_list(const std::vector<std::string>& v);  // "[a b]", as Go prints a []string

struct Candidate {
    std::string name;
    const IpPool* pool = nullptr;    // a pool rule
    const Subnet* subnet = nullptr;  // a subnet annotation: the subnet's own free addresses
};

struct Filtered {
    std::string name;
    std::string reason;  // Spiderpool's words: "disabled IPPool p1"
};

struct FamilyPlan {
    engine::Family family = engine::Family::kV4;
    std::vector<std::string> named;  // as the rule lists them, wildcards expanded
    std::vector<Filtered> filtered;
    std::vector<Candidate> order;  // to try, first to last
};

struct Selection {
    Rule rule = Rule::kClusterDefault;
    bool clean_gateway = false;
    std::vector<FamilyPlan> families;  // IPv4 first; a family the rule names nothing for is absent
    std::vector<Route> annotation_routes;  // ipam.spidernet.io/routes
    // Set when no address can be had: a bad annotation, an unknown pool, every pool of a family
    // filtered out. `families` still says what was found, for explain.
    std::optional<Error> error;
};

Selection select_pools(const Catalog& catalog, const PodFacts& pod, const PoolConfig& config);

// The addresses a pool may hand out: ips - excludeIPs - every SpiderReservedIP of its family -
// the gateway - the network address and the IPv4 broadcast address.
IpSet allocatable(const IpPool& pool, const Catalog& catalog);
// A subnet annotation's: the subnet's ips outside every pool carved from it, less the same.
IpSet allocatable(const Subnet& subnet, const Catalog& catalog);

}  // namespace shmipam::pools
