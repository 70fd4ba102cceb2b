#include "plugin/cni_result.h"

#include "plugin/netconf.h"

namespace shmipam::cni {

using nlohmann::json;

namespace {

// One ips[] element: "address/prefix", the gateway when there is one, and "version" in results
// before 1.0.0.
json ip_json(const std::string& cni_version, const engine::IpAddress& address, int prefix,
             const std::optional<engine::IpAddress>& gateway) {
    json ip;
    if (!version_at_least(cni_version, "1.0.0")) {
        ip["version"] = address.family == engine::Family::kV4 ? "4" : "6";
    }
    ip["address"] = address.to_string() + "/" + std::to_string(prefix);
    if (gateway) ip["gateway"] = gateway->to_string();
    return ip;
}

json result_json(const std::string& cni_version, json ips, const json& routes, const json& dns) {
    json out;
    out["cniVersion"] = cni_version;
    out["ips"] = std::move(ips);
    if (!routes.empty()) out["routes"] = routes;
    out["dns"] = dns.is_object() ? dns : json::object();
    return out;
}

}  // namespace

json make_result(const std::string& cni_version, const ipam::AddResult& result, const json& dns) {
    json ips = json::array();
    for (const auto& ip : result.ips) {
        ips.push_back(ip_json(cni_version, ip.address, ip.prefix, ip.gateway));
    }
    return result_json(cni_version, std::move(ips), result.routes, dns);
}

json make_error_json(const std::string& cni_version, const Error& e) {
    json out;
    out["cniVersion"] = cni_version;
    out["code"] = int(e.code);
    out["msg"] = e.msg;
    if (!e.details.empty()) out["details"] = e.details;
    return out;
}

json make_version_json() {
    json out;
    out["cniVersion"] = supported_versions().back();
    out["supportedVersions"] = supported_versions();
    return out;
}

}  // namespace shmipam::cni
