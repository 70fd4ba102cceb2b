#include "cluster/address_ranges.h"

namespace shmipam::cluster {

bool serves(const AddressRanges& ranges, const engine::Cidr& block) {
    if (ranges.empty()) return true;
    const engine::IpAddress first = block.network();
    const engine::u128 size = engine::u128{1} << (first.bits() - block.prefix);
    const engine::u128 last = first.value + (size - 1);
    for (const auto& r : ranges) {
        if (r.first.family == first.family && r.first.value <= last &&
            r.last.value >= first.value) {
            return true;
        }
    }
    return false;
}

bool holds(const AddressRanges& ranges, const engine::IpAddress& address) {
    for (const auto& r : ranges) {
        if (r.first.family == address.family && r.first.value <= address.value &&
            address.value <= r.last.value) {
            return true;
        }
    }
    return false;
}

std::optional<engine::IpAddress> first_not_in(const AddressRanges& ranges,
                                              const std::set<std::string>& taken) {
    for (const auto& r : ranges) {
        for (engine::u128 v = r.first.value;; ++v) {
            const engine::IpAddress a{v, r.first.family};
            if (taken.count(a.to_string()) == 0) return a;
            if (v == r.last.value) break;
        }
    }
    return std::nullopt;
}

}  // namespace shmipam::cluster
