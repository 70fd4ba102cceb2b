// A set of addresses of one family as sorted, disjoint, non-adjacent intervals: what a pool's
// `ips`, `excludeIPs` and a SpiderReservedIP's `ips` describe ("10.6.0.10-10.6.0.20",
// "10.6.0.30", "fd00::10-fd00::20"), and the arithmetic the allocatable set needs.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "engine/addr/ip_address.h"

namespace shmipam::pools {

struct Interval {
    engine::u128 first = 0;
    engine::u128 last = 0;  // inclusive
    bool operator==(const Interval&) const = default;
};

class IpSet {
  public:
    IpSet() = default;
    explicit IpSet(engine::Family family) : family_(family) {}

    // One entry as Spiderpool writes it: an address or "first-last" (first <= last). Code 7
    // with the entry quoted when it is neither, or of another family.
    Status add_text(const std::string& entry);
    void add(engine::u128 first, engine::u128 last);

    engine::Family family() const { return family_; }
    const std::vector<Interval>& intervals() const { return intervals_; }
    bool empty() const { return intervals_.empty(); }
    engine::u128 count() const;
    bool contains(const engine::IpAddress& a) const;
    bool overlaps(const IpSet& other) const;
    // Any address in common, the lowest, for messages.
    std::optional<engine::IpAddress> first_common(const IpSet& other) const;

    IpSet minus(const IpSet& other) const;
    IpSet intersect(const engine::Cidr& cidr) const;
    // Whether every address lies in `cidr`.
    bool within(const engine::Cidr& cidr) const;
    std::string to_string() const;  // "10.6.0.10-10.6.0.20,10.6.0.30"

    bool operator==(const IpSet&) const = default;

  private:
    engine::Family family_ = engine::Family::kV4;
    std::vector<Interval> intervals_;
};

}  // namespace shmipam::pools
