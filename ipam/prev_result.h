// CHECK's comparison, one for both modes: the attachment must hold exactly the addresses
// prevResult lists among ours (another plugin's addresses in prevResult are not ours to check).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/status.h"
#include "engine/addr/ip_address.h"

namespace shmipam::ipam {

// `prev_result`: the config's prevResult (nothing to compare without its "ips"); `ours`: which of
// its addresses are this IPAM's. Code 6 for ips that are not a list of {"address": CIDR}, 111
// listing what is allocated when they differ.
Status check_against_prev_result(const std::vector<engine::IpAddress>& held,
                                 const nlohmann::json& prev_result,
                                 const std::function<bool(const engine::IpAddress&)>& ours);

}  // namespace shmipam::ipam
