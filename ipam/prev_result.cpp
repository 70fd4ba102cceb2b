#include "ipam/prev_result.h"

#include <set>
#include <utility>

namespace shmipam::ipam {

Status check_against_prev_result(const std::vector<engine::IpAddress>& held,
                                 const nlohmann::json& prev_result,
                                 const std::function<bool(const engine::IpAddress&)>& ours) {
    if (!prev_result.is_object() || !prev_result.contains("ips")) return Ok{};
    const nlohmann::json& ips = prev_result["ips"];
    if (!ips.is_array()) return make_error(Code::kDecode, "prevResult.ips must be an array");
    std::set<std::pair<int, engine::u128>> allocated, listed;
    std::string have;
    for (const auto& a : held) {
        allocated.insert({int(a.family), a.value});
        have += (have.empty() ? "" : ",") + a.to_string();
    }
    for (const auto& ip : ips) {
        if (!ip.is_object() || !ip.contains("address") || !ip["address"].is_string()) {
            return make_error(Code::kDecode, "prevResult.ips[].address must be a string");
        }
        auto c = engine::Cidr::parse(ip["address"].get<std::string>());
        if (!c)
            return make_error(Code::kDecode, "invalid prevResult address " + ip["address"].dump());
        if (ours(c->address)) listed.insert({int(c->address.family), c->address.value});
    }
    if (allocated == listed) return Ok{};
    return make_error(Code::kCheckMismatch,
                      "the addresses allocated to the container differ from prevResult",
                      "allocated: " + have);
}

}  // namespace shmipam::ipam
