#include "engine/addr/range.h"

#include <algorithm>

namespace shmipam::engine {

namespace {

Expected<IpAddress> parse_ip_field(const std::string& text, const char* field) {
    auto a = IpAddress::parse(text);
    if (!a)
        return make_error(Code::kInvalidConfig,
                          std::string("invalid ") + field + " \"" + text + "\"");
    return *a;
}

}  // namespace

Expected<Range> Range::from_spec(const RangeSpec& spec) {
    if (spec.subnet.empty()) return make_error(Code::kInvalidConfig, "range is missing \"subnet\"");
    auto cidr = Cidr::parse(spec.subnet);
    if (!cidr) {
        return make_error(Code::kInvalidConfig, "invalid CIDR address: " + spec.subnet);
    }
    const int bits = cidr->address.bits();
    if (cidr->prefix > bits - 2) {
        return make_error(Code::kInvalidConfig,
                          "Network " + cidr->to_string() + " too small to allocate from");
    }
    if (cidr->has_host_bits()) {
        return make_error(Code::kInvalidConfig,
                          "Network has host bits set. For a subnet mask of length " +
                              std::to_string(cidr->prefix) + " the network address is " +
                              cidr->network().to_string());
    }
    Range r;
    r.subnet = *cidr;
    const IpAddress net = cidr->network();
    r.gateway = IpAddress{net.value + 1, net.family};
    if (!spec.gateway.empty()) {
        auto gw = parse_ip_field(spec.gateway, "gateway");
        if (!gw) return gw.error();
        if (gw->family != net.family) {
            return make_error(
                Code::kInvalidConfig,
                "gateway " + spec.gateway + " is not of the family of " + cidr->to_string());
        }
        r.gateway = *gw;
    }
    r.start = IpAddress{net.value + 1, net.family};
    if (!spec.range_start.empty()) {
        auto s = parse_ip_field(spec.range_start, "rangeStart");
        if (!s) return s.error();
        if (!cidr->contains(*s)) {
            return make_error(Code::kInvalidConfig, "RangeStart " + s->to_string() +
                                                        " not in network " + cidr->to_string());
        }
        r.start = *s;
    }
    // Default end: the last address, less the broadcast address for IPv4.
    r.end = cidr->last();
    if (net.family == Family::kV4) r.end.value -= 1;
    if (!spec.range_end.empty()) {
        auto e = parse_ip_field(spec.range_end, "rangeEnd");
        if (!e) return e.error();
        if (!cidr->contains(*e)) {
            return make_error(Code::kInvalidConfig, "RangeEnd " + e->to_string() +
                                                        " not in network " + cidr->to_string());
        }
        r.end = *e;
    }
    if (r.start.value > r.end.value) {
        return make_error(Code::kInvalidConfig, "RangeStart " + r.start.to_string() +
                                                    " is after RangeEnd " + r.end.to_string());
    }
    return r;
}

bool Range::contains(const IpAddress& a) const {
    return a.family == family() && a.value >= start.value && a.value <= end.value;
}

bool Range::overlaps(const Range& o) const {
    if (family() != o.family()) return false;
    return contains(o.start) || contains(o.end) || o.contains(start) || o.contains(end);
}

bool Range::excluded(const IpAddress& a) const {
    if (a == gateway) return true;
    if (a == subnet.network()) return true;
    return family() == Family::kV4 && a == subnet.last();
}

std::string Range::to_string() const {
    return start.to_string() + "-" + end.to_string();
}

Expected<RangeSet> make_range_set(const std::vector<RangeSpec>& specs) {
    if (specs.empty()) return make_error(Code::kInvalidConfig, "empty range set");
    RangeSet set;
    for (const auto& s : specs) {
        auto r = Range::from_spec(s);
        if (!r) return r.error();
        if (!set.empty() && r->family() != set.front().family()) {
            return make_error(Code::kInvalidConfig, "mixed address families");
        }
        for (const auto& prev : set) {
            if (prev.overlaps(*r)) {
                return make_error(Code::kInvalidConfig, "subnets " + prev.subnet.to_string() +
                                                            " and " + r->subnet.to_string() +
                                                            " overlap");
            }
        }
        set.push_back(*r);
    }
    return set;
}

Status check_range_sets(const std::vector<RangeSet>& sets) {
    if (sets.empty()) return make_error(Code::kInvalidConfig, "no IP ranges specified");
    for (size_t i = 0; i < sets.size(); ++i) {
        for (size_t j = i + 1; j < sets.size(); ++j) {
            for (const auto& a : sets[i]) {
                for (const auto& b : sets[j]) {
                    if (a.overlaps(b)) {
                        return make_error(Code::kInvalidConfig, "range set " + std::to_string(i) +
                                                                    " overlaps with " +
                                                                    std::to_string(j));
                    }
                }
            }
        }
    }
    return Ok{};
}

std::optional<size_t> range_index_for(const RangeSet& set, const IpAddress& a) {
    for (size_t i = 0; i < set.size(); ++i) {
        if (set[i].contains(a)) return i;
    }
    return std::nullopt;
}

bool excluded_in_set(const RangeSet& set, const IpAddress& a) {
    for (const auto& r : set) {
        if (r.excluded(a)) return true;
    }
    return false;
}

u128 usable_count(const RangeSet& set) {
    u128 n = 0;
    for (const auto& r : set) {
        std::vector<IpAddress> excluded{r.subnet.network()};
        if (r.family() == Family::kV4) excluded.push_back(r.subnet.last());
        for (const auto& other : set) excluded.push_back(other.gateway);
        std::sort(excluded.begin(), excluded.end());
        excluded.erase(std::unique(excluded.begin(), excluded.end()), excluded.end());
        n += r.size();
        for (const auto& a : excluded) {
            if (r.contains(a)) --n;
        }
    }
    return n;
}

std::string to_string(const RangeSet& set) {
    std::string s;
    for (const auto& r : set) {
        if (!s.empty()) s += ",";
        s += r.to_string();
    }
    return s;
}

}  // namespace shmipam::engine
