#include "pools/object_decode.h"

#include <cctype>

#include "pools/label_selector.h"

namespace shmipam::pools {

using engine::Cidr;
using engine::Family;
using engine::IpAddress;
using nlohmann::json;

namespace {

constexpr const char* kGroup = "spiderpool.spidernet.io/";

Error bad(const std::string& what) {
    return Error{Code::kInvalidConfig, what, ""};
}

// Reads an optional list of strings.
Status string_list(const json& spec, const char* field, const std::string& where,
                   std::vector<std::string>& out) {
    auto it = spec.find(field);
    if (it == spec.end() || it->is_null()) return Ok{};
    if (!it->is_array()) return bad(where + ": spec." + field + " must be a list of strings");
    for (const auto& v : *it) {
        if (!v.is_string()) return bad(where + ": spec." + field + " must be a list of strings");
        out.push_back(v.get<std::string>());
    }
    return Ok{};
}

Status string_map(const json& meta, const char* field, const std::string& where, Labels& out) {
    auto it = meta.find(field);
    if (it == meta.end() || it->is_null()) return Ok{};
    if (!it->is_object()) return bad(where + ": metadata." + field + " must be a map of strings");
    for (const auto& [k, v] : it->items()) {
        if (!v.is_string()) {
            return bad(where + ": metadata." + field + "." + k + " must be a string");
        }
        out[k] = v.get<std::string>();
    }
    return Ok{};
}

Status optional_bool(const json& spec, const char* field, const std::string& where, bool& out) {
    auto it = spec.find(field);
    if (it == spec.end() || it->is_null()) return Ok{};
    if (!it->is_boolean()) return bad(where + ": spec." + field + " must be true or false");
    out = it->get<bool>();
    return Ok{};
}

Status optional_selector(const json& spec, const char* field, const std::string& where,
                         std::optional<LabelSelector>& out) {
    auto it = spec.find(field);
    if (it == spec.end() || it->is_null()) return Ok{};
    auto s = decode_selector(*it, where + ": spec." + field);
    if (!s) return s.error();
    out = std::move(*s);
    return Ok{};
}

// ipVersion, subnet, ips, excludeIPs, gateway, routes: the address fields pools and subnets
// share. `ips_required`: a reserved-IP object has no subnet.
Status address_fields(const json& spec, const std::string& where, AddressSpec& obj) {
    auto sub = spec.find("subnet");
    if (sub == spec.end() || !sub->is_string()) return bad(where + ": spec.subnet is required");
    auto cidr = Cidr::parse(sub->get<std::string>());
    if (!cidr)
        return bad(where + ": spec.subnet \"" + sub->get<std::string>() + "\" is not a CIDR");
    if (cidr->has_host_bits()) {
        return bad(where + ": spec.subnet " + cidr->to_string() + " has host bits set (" +
                   cidr->network().to_string() + "/" + std::to_string(cidr->prefix) + "?)");
    }
    obj.subnet = *cidr;
    obj.family = cidr->address.family;
    if (auto v = spec.find("ipVersion"); v != spec.end() && !v->is_null()) {
        if (!v->is_number_integer() || (v->get<int>() != 4 && v->get<int>() != 6)) {
            return bad(where + ": spec.ipVersion must be 4 or 6");
        }
        if (v->get<int>() != int(obj.family)) {
            return bad(where + ": spec.ipVersion " + std::to_string(v->get<int>()) +
                       " does not match spec.subnet " + cidr->to_string());
        }
    }
    obj.ips = IpSet(obj.family);
    obj.exclude_ips = IpSet(obj.family);
    for (const char* field : {"ips", "excludeIPs"}) {
        std::vector<std::string> entries;
        if (auto st = string_list(spec, field, where, entries); !st) return st;
        IpSet& set = std::string(field) == "ips" ? obj.ips : obj.exclude_ips;
        for (const auto& e : entries) {
            if (auto st = set.add_text(e); !st) {
                return bad(where + ": spec." + field + ": " + st.error().msg);
            }
        }
        if (!set.within(*cidr)) {
            return bad(where + ": spec." + field + " " + set.to_string() +
                       " is not within subnet " + cidr->to_string());
        }
    }
    if (auto g = spec.find("gateway"); g != spec.end() && !g->is_null()) {
        auto a = g->is_string() ? IpAddress::parse(g->get<std::string>()) : std::nullopt;
        if (!a || a->family != obj.family || !cidr->contains(*a)) {
            return bad(where + ": spec.gateway " + g->dump() + " is not an address in subnet " +
                       cidr->to_string());
        }
        obj.gateway = *a;
    }
    if (auto r = spec.find("routes"); r != spec.end() && !r->is_null()) {
        if (!r->is_array()) return bad(where + ": spec.routes must be a list");
        for (const auto& route : *r) {
            if (!route.is_object() || !route.contains("dst") || !route["dst"].is_string() ||
                !route.contains("gw") || !route["gw"].is_string()) {
                return bad(where + ": each spec.routes item needs string dst and gw");
            }
            auto dst = Cidr::parse(route["dst"].get<std::string>());
            auto gw = IpAddress::parse(route["gw"].get<std::string>());
            if (!dst || !gw || dst->address.family != obj.family || gw->family != obj.family) {
                return bad(where + ": route " + route.dump() + " is not an IPv" +
                           std::to_string(int(obj.family)) + " dst CIDR and gw address");
            }
            obj.routes.push_back({route["dst"].get<std::string>(), route["gw"].get<std::string>()});
        }
    }
    return Ok{};
}

Expected<IpPool> decode_pool(const json& spec, const std::string& where) {
    IpPool p;
    if (auto st = address_fields(spec, where, p); !st) return st.error();
    if (auto st = optional_bool(spec, "default", where, p.is_default); !st) return st.error();
    if (auto st = optional_bool(spec, "disable", where, p.disabled); !st) return st.error();
    if (auto st = string_list(spec, "nodeName", where, p.node_name); !st) return st.error();
    if (auto st = string_list(spec, "namespaceName", where, p.namespace_name); !st)
        return st.error();
    if (auto st = string_list(spec, "multusName", where, p.multus_name); !st) return st.error();
    if (auto st = optional_selector(spec, "nodeAffinity", where, p.node_affinity); !st)
        return st.error();
    if (auto st = optional_selector(spec, "namespaceAffinity", where, p.namespace_affinity); !st)
        return st.error();
    if (auto st = optional_selector(spec, "podAffinity", where, p.pod_affinity); !st)
        return st.error();
    return p;
}

}  // namespace

Expected<DecodedObject> decode_object(const json& j, const Origin& origin) {
    const std::string at = origin.file + " (document " + std::to_string(origin.document) + ")";
    if (!j.is_object()) return bad(at + ": not a Kubernetes object");
    const std::string kind = j.value("kind", "");
    const std::string api = j.contains("apiVersion") && j["apiVersion"].is_string()
                                ? j["apiVersion"].get<std::string>()
                                : "";
    const bool spider = api.rfind(kGroup, 0) == 0;
    const bool ours = (spider && (kind == "SpiderIPPool" || kind == "SpiderSubnet" ||
                                  kind == "SpiderReservedIP")) ||
                      (api == "v1" && (kind == "Namespace" || kind == "Node"));
    if (!ours) return DecodedObject{IgnoredObject{}};

    auto meta = j.find("metadata");
    if (meta == j.end() || !meta->is_object() || !meta->contains("name") ||
        !(*meta)["name"].is_string() || (*meta)["name"].get<std::string>().empty()) {
        return bad(at + ": " + kind + " without metadata.name");
    }
    const std::string name = (*meta)["name"].get<std::string>();
    const std::string where = at + ": " + kind + " " + name;
    if (kind == "Namespace" || kind == "Node") {
        Labels labels, annotations;
        if (auto st = string_map(*meta, "labels", where, labels); !st) return st.error();
        if (kind == "Node") return DecodedObject{NodeObject{name, std::move(labels)}};
        if (auto st = string_map(*meta, "annotations", where, annotations); !st) return st.error();
        return DecodedObject{NamespaceObject{name, std::move(labels), std::move(annotations)}};
    }
    // Pool names become directory names: Kubernetes names (DNS subdomains) are safe; refuse
    // anything else rather than trusting it.
    for (char c : name) {
        if (!(std::islower(static_cast<unsigned char>(c)) ||
              std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.')) {
            return bad(where + ": metadata.name must be a DNS subdomain (a-z, 0-9, '-', '.')");
        }
    }
    if (name.size() > 200 || name.front() == '.') {
        return bad(where + ": metadata.name must be a DNS subdomain of at most 200 characters");
    }
    auto spec_it = j.find("spec");
    static const json kEmpty = json::object();
    const json& spec = (spec_it != j.end() && spec_it->is_object()) ? *spec_it : kEmpty;
    if (kind == "SpiderIPPool") {
        auto p = decode_pool(spec, where);
        if (!p) return p.error();
        p->name = name;
        p->origin = origin;
        p->terminating =
            meta->contains("deletionTimestamp") && !(*meta)["deletionTimestamp"].is_null();
        return DecodedObject{std::move(*p)};
    }
    if (kind == "SpiderSubnet") {
        Subnet s;
        if (auto st = address_fields(spec, where, s); !st) return st.error();
        s.name = name;
        s.origin = origin;
        return DecodedObject{std::move(s)};
    }
    // SpiderReservedIP: ipVersion and ips (no subnet).
    ReservedIp r;
    r.name = name;
    r.origin = origin;
    std::vector<std::string> entries;
    if (auto st = string_list(spec, "ips", where, entries); !st) return st.error();
    std::optional<Family> family;
    if (auto v = spec.find("ipVersion"); v != spec.end() && !v->is_null()) {
        if (!v->is_number_integer() || (v->get<int>() != 4 && v->get<int>() != 6)) {
            return bad(where + ": spec.ipVersion must be 4 or 6");
        }
        family = Family(v->get<int>());
    } else if (!entries.empty()) {
        auto first = IpAddress::parse(entries[0].substr(0, entries[0].find('-')));
        if (first) family = first->family;
    }
    r.family = family.value_or(Family::kV4);
    r.ips = IpSet(r.family);
    for (const auto& e : entries) {
        if (auto st = r.ips.add_text(e); !st) return bad(where + ": spec.ips: " + st.error().msg);
    }
    return DecodedObject{std::move(r)};
}

}  // namespace shmipam::pools
