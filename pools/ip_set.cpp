#include "pools/ip_set.h"

#include <algorithm>

namespace shmipam::pools {

using engine::Family;
using engine::IpAddress;
using engine::u128;

Status IpSet::add_text(const std::string& entry) {
    const size_t dash = entry.find('-');
    auto first = IpAddress::parse(entry.substr(0, dash));
    auto last = dash == std::string::npos ? first : IpAddress::parse(entry.substr(dash + 1));
    if (!first || !last) {
        return make_error(Code::kInvalidConfig,
                          "\"" + entry + "\" is neither an IP address nor a range \"first-last\"");
    }
    if (first->family != family_ || last->family != family_) {
        return make_error(Code::kInvalidConfig, "\"" + entry + "\" is not an IPv" +
                                                    std::to_string(int(family_)) + " address");
    }
    if (first->value > last->value) {
        return make_error(Code::kInvalidConfig,
                          "\"" + entry + "\": the first address is above the last");
    }
    add(first->value, last->value);
    return Ok{};
}

void IpSet::add(u128 first, u128 last) {
    // Insert, then merge overlapping and adjacent intervals.
    auto at = std::lower_bound(intervals_.begin(), intervals_.end(), first,
                               [](const Interval& i, u128 v) { return i.first < v; });
    at = intervals_.insert(at, Interval{first, last});
    std::vector<Interval> merged;
    merged.reserve(intervals_.size());
    for (const Interval& i : intervals_) {
        if (!merged.empty() &&
            (merged.back().last == ~u128{0} || i.first <= merged.back().last + 1)) {
            merged.back().last = std::max(merged.back().last, i.last);
        } else {
            merged.push_back(i);
        }
    }
    intervals_ = std::move(merged);
}

u128 IpSet::count() const {
    u128 n = 0;
    for (const Interval& i : intervals_) n += i.last - i.first + 1;
    return n;
}

bool IpSet::contains(const IpAddress& a) const {
    if (a.family != family_) return false;
    auto it = std::upper_bound(intervals_.begin(), intervals_.end(), a.value,
                               [](u128 v, const Interval& i) { return v < i.first; });
    return it != intervals_.begin() && std::prev(it)->last >= a.value;
}

std::optional<IpAddress> IpSet::first_common(const IpSet& other) const {
    if (other.family_ != family_) return std::nullopt;
    size_t i = 0, j = 0;
    while (i < intervals_.size() && j < other.intervals_.size()) {
        const Interval& a = intervals_[i];
        const Interval& b = other.intervals_[j];
        const u128 lo = std::max(a.first, b.first);
        if (lo <= std::min(a.last, b.last)) return IpAddress{lo, family_};
        (a.last < b.last) ? ++i : ++j;
    }
    return std::nullopt;
}

bool IpSet::overlaps(const IpSet& other) const {
    return first_common(other).has_value();
}

IpSet IpSet::minus(const IpSet& other) const {
    IpSet out(family_);
    if (other.family_ != family_) {
        out.intervals_ = intervals_;
        return out;
    }
    size_t j = 0;
    for (Interval cur : intervals_) {
        while (j < other.intervals_.size() && other.intervals_[j].last < cur.first) ++j;
        bool whole_gone = false;
        for (size_t k = j; k < other.intervals_.size() && other.intervals_[k].first <= cur.last;
             ++k) {
            const Interval& cut = other.intervals_[k];
            if (cut.first > cur.first) out.intervals_.push_back({cur.first, cut.first - 1});
            if (cut.last >= cur.last) {
                whole_gone = true;
                break;
            }
            cur.first = cut.last + 1;
        }
        if (!whole_gone) out.intervals_.push_back(cur);
    }
    return out;
}

IpSet IpSet::intersect(const engine::Cidr& cidr) const {
    IpSet out(family_);
    if (cidr.address.family != family_) return out;
    const u128 lo = cidr.network().value, hi = cidr.last().value;
    for (const Interval& i : intervals_) {
        const u128 a = std::max(i.first, lo), b = std::min(i.last, hi);
        if (a <= b) out.intervals_.push_back({a, b});
    }
    return out;
}

bool IpSet::within(const engine::Cidr& cidr) const {
    return intersect(cidr).count() == count();
}

std::string IpSet::to_string() const {
    std::string out;
    for (const Interval& i : intervals_) {
        if (!out.empty()) out += ',';
        out += IpAddress{i.first, family_}.to_string();
        if (i.last != i.first) out += "-" + IpAddress{i.last, family_}.to_string();
    }
    return out;
}

}  // namespace shmipam::pools
