// Pool mode's CHECK and STATUS.
#include "ipam/open_states.h"
#include "ipam/pool_mode.h"
#include "ipam/pool_state.h"
#include "ipam/prev_result.h"

namespace shmipam::ipam {

Status pool_check(const Request& r, const pools::Catalog& catalog, AddressSource& source,
                  Upkeep& upkeep) {
    std::vector<OpenState> opened;
    auto holdings = find_holdings(r, catalog, opened);
    if (!holdings) return holdings.error();
    std::vector<engine::IpAddress> held;
    for (const Holdings& h : *holdings) {
        for (const auto& a : h.addresses) held.push_back(a.address);
        if (auto st = source.still_held(r, object_name_of_state(h.state), h.addresses); !st) {
            return st;
        }
    }
    if (held.empty()) {
        return make_error(Code::kCheckNoAllocation, "no address is allocated to container " +
                                                        r.key.container_id + " interface " +
                                                        r.key.ifname + " in any pool");
    }
    // Addresses of our pools and subnets are ours to check; others are another plugin's.
    const auto ours = [&](const engine::IpAddress& a) {
        for (const auto& h : held) {
            if (h == a) return true;
        }
        for (const auto& p : catalog.pools()) {
            if (p.subnet.contains(a)) return true;
        }
        for (const auto& s : catalog.subnets()) {
            if (s.subnet.contains(a)) return true;
        }
        return false;
    };
    auto st = check_against_prev_result(held, r.prev_result, ours);
    keep_states(upkeep, opened);
    return st;
}

Status pool_status(const Request& r, const pools::Catalog& catalog) {
    if (catalog.pool_summaries().empty() && catalog.subnets().empty()) {
        return make_error(Code::kUnavailable, "poolsDir " + r.pools->pools_dir +
                                                  " holds no usable SpiderIPPool or SpiderSubnet");
    }
    return Ok{};
}

}  // namespace shmipam::ipam
