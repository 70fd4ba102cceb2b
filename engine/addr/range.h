// Ranges and range sets with host-local's meaning and validation: a range is a subnet with an
// optional rangeStart / rangeEnd / gateway; a range set is a list of ranges of one family that
// together provide one address per attachment.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/addr/ip_address.h"
#include "base/status.h"

namespace shmipam::engine {

struct RangeSpec {  // as written in the config; empty strings are absent fields
    std::string subnet;
    std::string range_start;
    std::string range_end;
    std::string gateway;
};

struct Range {
    Cidr subnet;  // network address, no host bits
    IpAddress start;
    IpAddress end;
    IpAddress gateway;

    // Validated and defaulted like host-local's Range.Canonicalize (messages kept close to its).
    static Expected<Range> from_spec(const RangeSpec& spec);

    Family family() const { return subnet.address.family; }
    bool contains(const IpAddress& a) const;  // within [start, end]
    bool overlaps(const Range& other) const;
    // Never handed out: the network address, the IPv4 broadcast address, the gateway.
    bool excluded(const IpAddress& a) const;
    u128 size() const { return end.value - start.value + 1; }
    std::string to_string() const;
};

using RangeSet = std::vector<Range>;

Expected<RangeSet> make_range_set(const std::vector<RangeSpec>& specs);
// Checks a list of range sets as host-local does (no set overlaps another).
Status check_range_sets(const std::vector<RangeSet>& sets);

// The range in the set that contains a, by index.
std::optional<size_t> range_index_for(const RangeSet& set, const IpAddress& a);
// True when a is excluded by any range of the set (a gateway of one range inside another).
bool excluded_in_set(const RangeSet& set, const IpAddress& a);
u128 usable_count(const RangeSet& set);
std::string to_string(const RangeSet& set);

}  // namespace shmipam::engine
