#include "plugin/cni_result.h"

#include "plugin/netconf.h"

namespace shmipam::cni {

using nlohmann::json;

json make_result(const std::string& cni_version, const std::vector<engine::AllocatedAddress>& addrs,
                 const json& routes, const json& dns) {
    const bool with_ip_version = !version_at_least(cni_version, "1.0.0");
    json ips = json::array();
    for (const auto& a : addrs) {
        json ip;
        if (with_ip_version) ip["version"] = a.address.family == engine::Family::kV4 ? "4" : "6";
        ip["address"] = a.address.to_string() + "/" + std::to_string(a.range->subnet.prefix);
        ip["gateway"] = a.range->gateway.to_string();
        ips.push_back(ip);
    }
    json out;
    out["cniVersion"] = cni_version;
    out["ips"] = ips;
    if (!routes.empty()) out["routes"] = routes;
    out["dns"] = dns.is_object() ? dns : json::object();
    return out;
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
