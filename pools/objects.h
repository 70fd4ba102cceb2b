// The Kubernetes objects pool mode reads, as parsed values: Spiderpool's SpiderIPPool,
// SpiderSubnet and SpiderReservedIP (spiderpool.spidernet.io/v2beta1) and the Namespace and Node
// objects the selection rules look at. Only the fields the rules use; the rest is ignored, as
// the API server's clients ignore unknown fields.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/addr/ip_address.h"
#include "pools/ip_set.h"

namespace shmipam::pools {

using Labels = std::map<std::string, std::string>;

// metav1.LabelSelector: every matchLabels pair and every expression must hold.
struct LabelRequirement {
    enum class Op { kIn, kNotIn, kExists, kDoesNotExist };
    std::string key;
    Op op = Op::kIn;
    std::vector<std::string> values;
};
struct LabelSelector {
    Labels match_labels;
    std::vector<LabelRequirement> expressions;
};

struct Route {
    std::string dst;
    std::string gw;
};

// Where an object came from, for messages that say which file to fix.
struct Origin {
    std::string file;
    size_t document = 0;  // 1-based within the file (YAML documents and List items)
};

// What a SpiderIPPool and a SpiderSubnet both are: named addresses with a gateway and routes.
struct AddressSpec {
    std::string name;
    Origin origin;
    engine::Family family = engine::Family::kV4;
    engine::Cidr subnet;
    IpSet ips;
    IpSet exclude_ips;
    std::optional<engine::IpAddress> gateway;
    std::vector<Route> routes;
};

struct IpPool : AddressSpec {
    bool terminating = false;  // metadata.deletionTimestamp is set
    bool is_default = false;
    bool disabled = false;
    std::vector<std::string> node_name;
    std::optional<LabelSelector> node_affinity;
    std::vector<std::string> namespace_name;
    std::optional<LabelSelector> namespace_affinity;
    std::optional<LabelSelector> pod_affinity;
    std::vector<std::string> multus_name;
};

struct Subnet : AddressSpec {};

struct ReservedIp {
    std::string name;
    Origin origin;
    engine::Family family = engine::Family::kV4;
    IpSet ips;
};

struct NamespaceObject {
    std::string name;
    Labels labels;
    Labels annotations;
};

struct NodeObject {
    std::string name;
    Labels labels;
};

}  // namespace shmipam::pools
