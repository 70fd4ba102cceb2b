#include "pools/selection.h"

#include <fnmatch.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "pools/label_selector.h"

namespace shmipam::pools {

using engine::Family;
using nlohmann::json;

std::string describe(Rule rule) {
    switch (rule) {
        case Rule::kSubnetsAnnotation:
            return std::string("pod annotation ") + annotation::kSubnets;
        case Rule::kSubnetAnnotation:
            return std::string("pod annotation ") + annotation::kSubnet;
        case Rule::kIpPoolsAnnotation:
            return std::string("pod annotation ") + annotation::kIpPools;
        case Rule::kIpPoolAnnotation:
            return std::string("pod annotation ") + annotation::kIpPool;
        case Rule::kNamespaceDefault:
            return "namespace annotation ipam.spidernet.io/default-ipv4-ippool / "
                   "default-ipv6-ippool";
        case Rule::kConfigDefault:
            return "CNI config default_ipv4_ippool / default_ipv6_ippool";
        case Rule::kClusterDefault:
            return "cluster default pools (spec.default: true)";
    }
    return "?";
}

std::string family_name(Family f) {
    return f == Family::kV4 ? "IPv4" : "IPv6";
}

std::string go_list(const std::vector<std::string>& v) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? " " : "") + v[i];
    return out + "]";
}

namespace {

constexpr Code kBadAnnotation = Code::kPoolAnnotationInvalid;

Error annotation_error(const std::string& key, const std::string& what) {
    return Error{kBadAnnotation, "invalid format of Pod annotation '" + key + "': " + what, ""};
}

// A JSON list of strings, or an error naming the key.
Expected<std::vector<std::string>> string_list(const json& j, const std::string& key,
                                               const char* field) {
    std::vector<std::string> out;
    if (j.is_null()) return out;
    if (!j.is_array())
        return annotation_error(key, std::string(field) + " must be a list of names");
    for (const auto& v : j) {
        if (!v.is_string()) {
            return annotation_error(key, std::string(field) + " must be a list of names");
        }
        out.push_back(v.get<std::string>());
    }
    return out;
}

// The lists a rule gave, before wildcard expansion.
struct RuleLists {
    std::vector<std::string> v4, v6;
    bool clean_gateway = false;
};

Expected<RuleLists> lists_of(const json& item, const std::string& key, bool clean_default) {
    RuleLists r;
    r.clean_gateway = clean_default;
    if (!item.is_object()) return annotation_error(key, "must be a JSON object");
    auto v4 = string_list(item.value("ipv4", json()), key, "ipv4");
    if (!v4) return v4.error();
    auto v6 = string_list(item.value("ipv6", json()), key, "ipv6");
    if (!v6) return v6.error();
    r.v4 = *v4;
    r.v6 = *v6;
    if (auto c = item.find("cleangateway"); c != item.end() && !c->is_null()) {
        if (!c->is_boolean()) return annotation_error(key, "cleangateway must be true or false");
        r.clean_gateway = c->get<bool>();
    }
    return r;
}

// The interface an `ippools` item without one is for: Spiderpool's unnamed multi-NIC form
// matches by position, item 0 the pod's first interface and item i Multus's `net<i>`.
std::string interface_at(size_t position) {
    return position == 0 ? "eth0" : "net" + std::to_string(position);
}

bool names_no_interface(const json& item) {
    return !item.contains("interface") || item["interface"].is_null() ||
           (item["interface"].is_string() && item["interface"].get<std::string>().empty());
}

// The item of a per-interface list (`ippools`, `subnets`) for this interface, validated as
// Spiderpool does: every item names its interface, once; with `by_position`, every item may
// instead name none, each then for the interface at its position (never some of each: which
// interface an unnamed item meant beside named ones is a guess).
Expected<json> item_for_interface(const std::string& text, const std::string& key,
                                  const std::string& ifname, bool by_position) {
    json doc = json::parse(text, nullptr, false);
    if (doc.is_discarded()) return annotation_error(key, "not valid JSON");
    if (!doc.is_array()) return annotation_error(key, "must be a JSON list");
    if (doc.empty()) return annotation_error(key, "value requires at least one item");
    size_t unnamed_items = 0;
    for (const json& item : doc) {
        if (!item.is_object()) return annotation_error(key, "each item must be an object");
        unnamed_items += names_no_interface(item) ? 1 : 0;
    }
    if (by_position && unnamed_items != 0 && unnamed_items != doc.size()) {
        return annotation_error(key, "NIC should be either all specified or all unspecified");
    }
    std::set<std::string> seen;
    json found;
    for (size_t position = 0; position < doc.size(); ++position) {
        const json& item = doc[position];
        const bool unnamed = names_no_interface(item);
        if (unnamed && !by_position) return annotation_error(key, "interface must be specified");
        if (!unnamed && !item["interface"].is_string()) {
            return annotation_error(key, "interface must be a string");
        }
        const std::string nic =
            unnamed ? interface_at(position) : item["interface"].get<std::string>();
        if (!seen.insert(nic).second) return annotation_error(key, "duplicate interface " + nic);
        if (nic == ifname) found = item;
    }
    if (found.is_null()) {
        return annotation_error(
            key, "interfaces do not contain that requested by runtime (" + ifname + ")");
    }
    return found;
}

// The namespace's default lists: the newer key wins over the seeds' older spelling.
Expected<std::vector<std::string>> namespace_default(const NamespaceObject* ns, const char* key,
                                                     const char* old_key) {
    if (ns == nullptr) return std::vector<std::string>{};
    auto it = ns->annotations.find(key);
    const char* used = key;
    if (it == ns->annotations.end()) {
        it = ns->annotations.find(old_key);
        used = old_key;
    }
    if (it == ns->annotations.end()) return std::vector<std::string>{};
    json j = json::parse(it->second, nullptr, false);
    if (j.is_discarded() || !j.is_array()) {
        return Error{kBadAnnotation,
                     "invalid format of Namespace " + ns->name + " annotation '" + used +
                         "': must be a JSON list of pool names",
                     ""};
    }
    return string_list(j, used, "value");
}

bool is_pattern(const std::string& name) {
    return name.find_first_of("*?[") != std::string::npos;
}

// One family's list: wildcards expanded against that family's pools (by name), literal names
// kept as written; a name twice after expansion is an error, as in Spiderpool.
Expected<std::vector<std::string>> expand(const std::vector<std::string>& listed, Family family,
                                          const Catalog& catalog, const std::string& nic) {
    std::vector<std::string> out;
    std::set<std::string> seen;
    for (const auto& name : listed) {
        std::vector<std::string> names;
        if (is_pattern(name)) {
            for (const PoolSummary& p : catalog.pool_summaries()) {
                if (p.family == family &&
                    ::fnmatch(name.c_str(), std::string(p.name).c_str(), 0) == 0) {
                    names.emplace_back(p.name);
                }
            }
        } else {
            names.push_back(name);
        }
        for (auto& n : names) {
            if (!seen.insert(n).second) {
                return Error{kBadAnnotation, "duplicate IPPool " + n + " specified for NIC " + nic,
                             ""};
            }
            out.push_back(std::move(n));
        }
    }
    return out;
}

// The Multus network ("namespace/name") the interface is attached with, or why it is unknown.
struct MultusNetwork {
    std::string name;
    std::string why_unknown;
};

// "ns/name@if", "name@if", "ns/name", "name".
std::pair<std::string, std::string> split_network(std::string text) {
    if (auto at = text.find('@'); at != std::string::npos) text.resize(at);
    auto slash = text.find('/');
    if (slash == std::string::npos) return {"", text};
    return {text.substr(0, slash), text.substr(slash + 1)};
}

MultusNetwork interface_network(const PodFacts& pod, const PoolConfig& config) {
    if (pod.ifname == "eth0" || pod.ifname == "0") {
        std::string text;
        if (auto it = pod.annotations.find(annotation::kMultusDefaultNetwork);
            it != pod.annotations.end()) {
            text = it->second;
        } else {
            text = config.multus_cluster_network;
        }
        if (text.empty()) {
            return {"",
                    "cluster-network multus isn't set (set multusClusterNetwork in the config "
                    "or the pod annotation " +
                        std::string(annotation::kMultusDefaultNetwork) + ")"};
        }
        auto [ns, name] = split_network(text);
        return {(ns.empty() ? config.multus_namespace : ns) + "/" + name, ""};
    }
    auto it = pod.annotations.find(annotation::kMultusNetworks);
    if (it == pod.annotations.end()) {
        return {"", "no matched multus object for NIC '" + pod.ifname + "': the pod has no " +
                        annotation::kMultusNetworks + " annotation"};
    }
    // A JSON list of NetworkSelectionElements, or "a, ns/b@net2" text.
    std::vector<std::tuple<std::string, std::string, std::string>> elements;  // ns, name, if
    json j = json::parse(it->second, nullptr, false);
    if (!j.is_discarded() && j.is_array()) {
        for (const auto& e : j) {
            if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) {
                return {"", "failed to parse pod network annotation: each item needs a name"};
            }
            elements.emplace_back(e.value("namespace", ""), e["name"].get<std::string>(),
                                  e.value("interface", ""));
        }
    } else {
        std::string rest = it->second;
        size_t start = 0;
        while (start <= rest.size()) {
            size_t comma = rest.find(',', start);
            std::string item =
                rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
            item.erase(0, item.find_first_not_of(" \t"));
            item.erase(item.find_last_not_of(" \t") + 1);
            if (!item.empty()) {
                std::string nic;
                if (auto at = item.find('@'); at != std::string::npos) nic = item.substr(at + 1);
                auto [ns, name] = split_network(item);
                elements.emplace_back(ns, name, nic);
            }
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
    }
    for (size_t i = 0; i < elements.size(); ++i) {
        auto [ns, name, nic] = elements[i];
        if (nic.empty()) nic = "net" + std::to_string(i + 1);
        if (pod.ifname == nic || pod.ifname == std::to_string(i + 1)) {
            return {(ns.empty() ? pod.namespace_ : ns) + "/" + name, ""};
        }
    }
    return {"", "no matched multus object for NIC '" + pod.ifname +
                    "'. The multus network-attachments: " + it->second};
}

// Why the pool does not serve this pod ("" when it does), in Spiderpool's words.
std::string filter_reason(const IpPool& p, Family family, const PodFacts& pod,
                          const PoolConfig& config, const Catalog& catalog) {
    const std::string& n = p.name;
    if (p.terminating) return "terminating IPPool " + n;
    if (p.disabled) return "disabled IPPool " + n;
    if (p.family != family) {
        return "expect an " + family_name(family) + " IPPool, but the version of the IPPool " + n +
               " is " + family_name(p.family);
    }
    if (!p.node_name.empty()) {
        if (std::find(p.node_name.begin(), p.node_name.end(), pod.node_name) == p.node_name.end())
            return "unmatched Node name of IPPool " + n;
    } else if (p.node_affinity) {
        const NodeObject* node = catalog.node(pod.node_name);
        if (node == nullptr) {
            return "unmatched Node affinity of IPPool " + n + " (Node " + pod.node_name +
                   " is not in poolsDir)";
        }
        if (!matches(*p.node_affinity, node->labels))
            return "unmatched Node affinity of IPPool " + n;
    }
    if (!p.namespace_name.empty()) {
        if (std::find(p.namespace_name.begin(), p.namespace_name.end(), pod.namespace_) ==
            p.namespace_name.end())
            return "unmatched Namespace name of IPPool " + n;
    } else if (p.namespace_affinity) {
        const NamespaceObject* ns = catalog.namespace_(pod.namespace_);
        if (ns == nullptr) {
            return "unmatched Namespace affinity of IPPool " + n + " (Namespace " + pod.namespace_ +
                   " is not in poolsDir)";
        }
        if (!matches(*p.namespace_affinity, ns->labels))
            return "unmatched Namespace affinity of IPPool " + n;
    }
    if (p.pod_affinity && !matches(*p.pod_affinity, pod.labels)) {
        return "unmatched Pod affinity of IPPool " + n;
    }
    if (!p.multus_name.empty()) {
        const MultusNetwork net = interface_network(pod, config);
        if (!net.why_unknown.empty()) {
            return net.why_unknown + ", the IPPool " + n + " specified multusName " +
                   go_list(p.multus_name) + " unmatched";
        }
        bool any = false;
        for (const auto& m : p.multus_name) {
            const std::string expected =
                m.find('/') == std::string::npos ? config.multus_namespace + "/" + m : m;
            any = any || expected == net.name;
        }
        if (!any) {
            return "interface " + pod.ifname + " IPPool " + n + " specified multusName " +
                   go_list(p.multus_name) + " unmacthed multusCR " + net.name;
        }
    }
    if (p.ips.empty()) return "IPPool " + n + " has no IP addresses (spec.ips is empty)";
    const IpSet usable = p.ips.minus(p.exclude_ips);
    if (usable.empty()) return "all IP addresses of IPPool " + n + " are excluded (excludeIPs)";
    if (usable.minus(catalog.reserved_ips(p.family)).empty()) {
        return "all IP addresses of IPPool " + n + " are reserved (SpiderReservedIP)";
    }
    return "";
}

// A pool not found may be in a file the catalog refused whole (one over a bound, or not YAML):
// the files it refused, for the error's details ("" when none).
std::string refused_files(const Catalog& catalog) {
    // Enough to point at the file; `shmipamctl explain` lists them all.
    constexpr size_t kShownProblems = 3;
    std::string out;
    size_t shown = 0;
    for (const Problem& p : catalog.problems()) {
        if (shown++ == kShownProblems) {
            out += "; ...";
            break;
        }
        out += (out.empty() ? "poolsDir has objects it could not use: " : "; ") + p.message;
    }
    return out;
}

// Spiderpool's ByPoolPriority, as a key compared lexicographically (more is earlier).
std::tuple<bool, bool, bool, bool, bool, bool> priority(const IpPool& p) {
    return {p.pod_affinity.has_value(),       !p.node_name.empty(),
            p.node_affinity.has_value(),      !p.namespace_name.empty(),
            p.namespace_affinity.has_value(), !p.multus_name.empty()};
}

// Expands, looks up, filters and sorts one family of a pool rule.
std::optional<Error> plan_family(FamilyPlan& plan, const std::vector<std::string>& listed,
                                 const Catalog& catalog, const PodFacts& pod,
                                 const PoolConfig& config) {
    auto names = expand(listed, plan.family, catalog, pod.ifname);
    if (!names) return names.error();
    plan.named = *names;
    if (plan.named.empty()) return std::nullopt;  // a wildcard that matched nothing
    std::vector<const IpPool*> kept;
    for (const auto& name : plan.named) {
        const IpPool* p = catalog.pool(name);
        if (p == nullptr) {
            const std::string why = catalog.withdrawn(name);
            return Error{Code::kPoolNotFound,
                         why.empty() ? "failed to get original IPPool " + name +
                                           ": spiderippools.spiderpool.spidernet.io \"" + name +
                                           "\" not found in poolsDir"
                                     : "IPPool " + name + " is out of service: " + why,
                         why.empty() ? refused_files(catalog) : ""};
        }
        std::string reason = filter_reason(*p, plan.family, pod, config, catalog);
        if (reason.empty()) {
            kept.push_back(p);
        } else {
            plan.filtered.push_back({name, std::move(reason)});
        }
    }
    std::stable_sort(kept.begin(), kept.end(),
                     [](const IpPool* a, const IpPool* b) { return priority(*a) > priority(*b); });
    for (const IpPool* p : kept) plan.order.push_back({p->name, p, nullptr});
    if (plan.order.empty()) {
        std::string reasons;
        for (const auto& f : plan.filtered) reasons += (reasons.empty() ? "" : ", ") + f.reason;
        return Error{Code::kNoPoolAvailable,
                     "all " + family_name(plan.family) + " IPPools " + go_list(plan.named) +
                         " of " + pod.ifname + " filtered out: [" + reasons + "]",
                     ""};
    }
    return std::nullopt;
}

// The subnet rule: the first subnet named per family (as Spiderpool: one subnet per family).
std::optional<Error> plan_subnet(FamilyPlan& plan, const std::vector<std::string>& listed,
                                 const Catalog& catalog) {
    plan.named = {listed.front()};
    const Subnet* s = catalog.subnet(listed.front());
    if (s == nullptr) {
        const std::string why = catalog.withdrawn(listed.front());
        return Error{Code::kPoolNotFound,
                     why.empty() ? "SpiderSubnet " + listed.front() + " not found in poolsDir"
                                 : "SpiderSubnet " + listed.front() + " is out of service: " + why,
                     ""};
    }
    if (s->family != plan.family) {
        plan.filtered.push_back(
            {s->name, "expect an " + family_name(plan.family) +
                          " SpiderSubnet, but the version of the SpiderSubnet " + s->name + " is " +
                          family_name(s->family)});
        return Error{Code::kNoPoolAvailable, plan.filtered.back().reason, ""};
    }
    plan.order.push_back({s->name, nullptr, s});
    return std::nullopt;
}

Status parse_routes_annotation(const PodFacts& pod, Selection& out) {
    auto it = pod.annotations.find(annotation::kRoutes);
    if (it == pod.annotations.end()) return Ok{};
    json j = json::parse(it->second, nullptr, false);
    if (j.is_discarded() || !j.is_array()) {
        return annotation_error(annotation::kRoutes, "must be a JSON list of {dst, gw}");
    }
    for (const auto& r : j) {
        if (!r.is_object() || !r.contains("dst") || !r["dst"].is_string() || !r.contains("gw") ||
            !r["gw"].is_string() || !engine::Cidr::parse(r["dst"].get<std::string>()) ||
            !engine::IpAddress::parse(r["gw"].get<std::string>())) {
            return annotation_error(annotation::kRoutes,
                                    "each route needs a CIDR dst and an address gw: " + r.dump());
        }
        out.annotation_routes.push_back({r["dst"].get<std::string>(), r["gw"].get<std::string>()});
    }
    return Ok{};
}

// Step 1: which rule applies and its two lists.
Expected<RuleLists> candidates(const Catalog& catalog, const PodFacts& pod,
                               const PoolConfig& config, Rule& rule) {
    const auto& a = pod.annotations;
    if (auto it = a.find(annotation::kSubnets); it != a.end()) {
        rule = Rule::kSubnetsAnnotation;
        auto item = item_for_interface(it->second, annotation::kSubnets, pod.ifname, false);
        if (!item) return item.error();
        return lists_of(*item, annotation::kSubnets, config.clean_gateway);
    }
    if (auto it = a.find(annotation::kSubnet); it != a.end()) {
        rule = Rule::kSubnetAnnotation;
        json j = json::parse(it->second, nullptr, false);
        if (j.is_discarded()) return annotation_error(annotation::kSubnet, "not valid JSON");
        return lists_of(j, annotation::kSubnet, config.clean_gateway);
    }
    if (auto it = a.find(annotation::kIpPools); it != a.end()) {
        rule = Rule::kIpPoolsAnnotation;
        auto item = item_for_interface(it->second, annotation::kIpPools, pod.ifname, true);
        if (!item) return item.error();
        return lists_of(*item, annotation::kIpPools, false);  // per item, default false
    }
    if (auto it = a.find(annotation::kIpPool); it != a.end()) {
        rule = Rule::kIpPoolAnnotation;
        json j = json::parse(it->second, nullptr, false);
        if (j.is_discarded()) return annotation_error(annotation::kIpPool, "not valid JSON");
        auto lists = lists_of(j, annotation::kIpPool, config.clean_gateway);
        if (lists) lists->clean_gateway = config.clean_gateway;  // ippool: the config's
        return lists;
    }
    const NamespaceObject* ns = catalog.namespace_(pod.namespace_);
    auto v4 = namespace_default(ns, annotation::kNsDefaultV4, annotation::kNsDefaultV4Old);
    if (!v4) return v4.error();
    auto v6 = namespace_default(ns, annotation::kNsDefaultV6, annotation::kNsDefaultV6Old);
    if (!v6) return v6.error();
    if (!v4->empty() || !v6->empty()) {
        rule = Rule::kNamespaceDefault;
        return RuleLists{*v4, *v6, config.clean_gateway};
    }
    if (!config.default_ipv4_ippool.empty() || !config.default_ipv6_ippool.empty()) {
        rule = Rule::kConfigDefault;
        return RuleLists{config.default_ipv4_ippool, config.default_ipv6_ippool,
                         config.clean_gateway};
    }
    rule = Rule::kClusterDefault;
    RuleLists r;
    r.clean_gateway = config.clean_gateway;
    for (const PoolSummary& p : catalog.pool_summaries()) {  // by name
        if (!p.is_default) continue;
        (p.family == Family::kV4 ? r.v4 : r.v6).emplace_back(p.name);
    }
    if (r.v4.empty() && r.v6.empty()) {
        return Error{Code::kNoPoolAvailable,
                     "no pool selection rules of any type are specified: no pod or namespace "
                     "annotation, no default_ipv4_ippool / default_ipv6_ippool in the config, "
                     "and no SpiderIPPool in poolsDir with spec.default: true",
                     ""};
    }
    return r;
}

}  // namespace

Selection select_pools(const Catalog& catalog, const PodFacts& pod, const PoolConfig& config) {
    Selection out;
    auto lists = candidates(catalog, pod, config, out.rule);
    if (!lists) {
        out.error = lists.error();
        return out;
    }
    out.clean_gateway = lists->clean_gateway;
    if (auto st = parse_routes_annotation(pod, out); !st) {
        out.error = st.error();
        return out;
    }
    const bool subnet_rule =
        out.rule == Rule::kSubnetsAnnotation || out.rule == Rule::kSubnetAnnotation;
    for (Family f : {Family::kV4, Family::kV6}) {
        const auto& listed = f == Family::kV4 ? lists->v4 : lists->v6;
        if (listed.empty()) continue;  // the rule names nothing for this family: nothing
        FamilyPlan plan;
        plan.family = f;
        auto err = subnet_rule ? plan_subnet(plan, listed, catalog)
                               : plan_family(plan, listed, catalog, pod, config);
        // A wildcard that matched nothing gives the family nothing, as an empty list does.
        if (!err && plan.named.empty()) continue;
        out.families.push_back(std::move(plan));
        if (err && !out.error) out.error = err;
    }
    if (!out.error && out.families.empty()) {
        out.error = Error{Code::kNoPoolAvailable,
                          "the " + describe(out.rule) +
                              " applies but names no pool of either family for " + pod.ifname,
                          ""};
    }
    return out;
}

namespace {

IpSet without_special(IpSet set, const engine::Cidr& subnet,
                      const std::optional<engine::IpAddress>& gateway) {
    IpSet special(set.family());
    special.add(subnet.network().value, subnet.network().value);
    if (subnet.address.family == Family::kV4) special.add(subnet.last().value, subnet.last().value);
    if (gateway) special.add(gateway->value, gateway->value);
    return set.minus(special);
}

}  // namespace

IpSet allocatable(const IpPool& pool, const Catalog& catalog) {
    return without_special(
        pool.ips.minus(pool.exclude_ips).minus(catalog.reserved_ips(pool.family)), pool.subnet,
        pool.gateway);
}

IpSet allocatable(const Subnet& subnet, const Catalog& catalog) {
    IpSet carved(subnet.family);
    for (const IpPool& p : catalog.pools()) {
        if (p.family != subnet.family) continue;
        for (const Interval& i : p.ips.intervals()) carved.add(i.first, i.last);
    }
    return without_special(subnet.ips.minus(subnet.exclude_ips)
                               .minus(catalog.reserved_ips(subnet.family))
                               .minus(carved),
                           subnet.subnet, subnet.gateway);
}

}  // namespace shmipam::pools
