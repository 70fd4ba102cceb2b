#include "pools/catalog.h"

#include <algorithm>
#include <set>

#include "pools/catalog_codec.h"

namespace shmipam::pools {

void Catalog::add(DecodedObject object) {
    std::visit(
        [&](auto&& o) {
            using T = std::decay_t<decltype(o)>;
            if constexpr (std::is_same_v<T, IpPool>)
                pools_.push_back(std::move(o));
            else if constexpr (std::is_same_v<T, Subnet>)
                subnets_.push_back(std::move(o));
            else if constexpr (std::is_same_v<T, ReservedIp>)
                reserved_.push_back(std::move(o));
            else if constexpr (std::is_same_v<T, NamespaceObject>)
                namespaces_[o.name] = std::move(o);
            else if constexpr (std::is_same_v<T, NodeObject>)
                nodes_[o.name] = std::move(o);
        },
        std::move(object));
}

void Catalog::add_problem(const std::string& file, const std::string& message) {
    problems_.push_back({file, message});
}

namespace {

template <typename T>
void drop_named(std::vector<T>& v, const std::set<std::string>& names) {
    v.erase(std::remove_if(v.begin(), v.end(), [&](const T& o) { return names.count(o.name); }),
            v.end());
}

}  // namespace

void Catalog::finish() {
    auto by_name = [](const auto& a, const auto& b) { return a.name < b.name; };
    std::stable_sort(pools_.begin(), pools_.end(), by_name);
    std::stable_sort(subnets_.begin(), subnets_.end(), by_name);
    std::set<std::string> drop_pools, drop_subnets;
    // A name used twice: neither copy is trusted (which one the cluster has is unknown).
    auto twice = [&](const auto& sorted, const char* kind, std::set<std::string>& drop) {
        for (size_t i = 1; i < sorted.size(); ++i) {
            if (sorted[i].name != sorted[i - 1].name) continue;
            const std::string msg = std::string(kind) + " " + sorted[i].name +
                                    " is defined twice: in " + sorted[i - 1].origin.file + " and " +
                                    sorted[i].origin.file;
            add_problem(sorted[i].origin.file, msg);
            withdrawn_[sorted[i].name] = msg;
            drop.insert(sorted[i].name);
        }
    };
    twice(pools_, "SpiderIPPool", drop_pools);
    twice(subnets_, "SpiderSubnet", drop_subnets);
    // Two pools of one family sharing an address would each hand it out from its own state:
    // both are withdrawn until one is fixed.
    for (size_t i = 0; i < pools_.size(); ++i) {
        for (size_t j = i + 1; j < pools_.size(); ++j) {
            const IpPool& a = pools_[i];
            const IpPool& b = pools_[j];
            if (a.name == b.name || a.family != b.family) continue;
            if (auto common = a.ips.first_common(b.ips)) {
                const std::string msg = "SpiderIPPool " + a.name + " (" + a.origin.file +
                                        ") and SpiderIPPool " + b.name + " (" + b.origin.file +
                                        ") overlap at " + common->to_string() +
                                        ": both are out of service until one is fixed";
                add_problem(b.origin.file, msg);
                withdrawn_[a.name] = msg;
                withdrawn_[b.name] = msg;
                drop_pools.insert(a.name);
                drop_pools.insert(b.name);
            }
        }
    }
    drop_named(pools_, drop_pools);
    drop_named(subnets_, drop_subnets);
    summarize();
}

void Catalog::summarize() {
    summaries_.clear();
    for (const IpPool& p : pools_) summaries_.push_back({p.name, p.family, p.is_default});
}

const std::vector<PoolSummary>& Catalog::pool_summaries() const {
    if (!summarized_) {
        summaries_.reserve(table_count_);
        for_each_pool_record(table_, blobs_, table_count_, [&](const PoolRecord& r) {
            summaries_.push_back({r.name, r.family, r.is_default});
            return true;
        });
        summarized_ = true;
    }
    return summaries_;
}

const IpPool* Catalog::pool(const std::string& name) const {
    if (all_decoded_) {
        auto it =
            std::lower_bound(pools_.begin(), pools_.end(), name,
                             [](const IpPool& p, const std::string& n) { return p.name < n; });
        return it != pools_.end() && it->name == name ? &*it : nullptr;
    }
    if (auto d = decoded_.find(name); d != decoded_.end()) return &d->second;
    // A walk of the table in the snapshot: a few instructions a record, no allocation.
    std::optional<PoolRecord> found;
    for_each_pool_record(table_, blobs_, table_count_, [&](const PoolRecord& r) {
        if (r.name == name) found = r;
        return !found && r.name < name;  // sorted by name
    });
    if (!found) return nullptr;
    auto p = decode_pool(found->blob, found->checksum);
    if (!p) {
        withdrawn_[name] =
            "the compiled pools snapshot is damaged: remove <runDir>/_pools/catalog-* (it is "
            "rebuilt)";
        return nullptr;
    }
    return &decoded_.emplace(name, std::move(*p)).first->second;
}

const std::vector<IpPool>& Catalog::pools() const {
    if (!all_decoded_) {
        pools_.clear();
        pools_.reserve(table_count_);
        for_each_pool_record(table_, blobs_, table_count_, [&](const PoolRecord& r) {
            if (auto p = decode_pool(r.blob, r.checksum)) pools_.push_back(std::move(*p));
            return true;
        });
        all_decoded_ = true;  // decoded_ stays: pointers pool() gave out remain valid
    }
    return pools_;
}

const Subnet* Catalog::subnet(const std::string& name) const {
    auto it = std::lower_bound(subnets_.begin(), subnets_.end(), name,
                               [](const Subnet& s, const std::string& n) { return s.name < n; });
    return it != subnets_.end() && it->name == name ? &*it : nullptr;
}

const NamespaceObject* Catalog::namespace_(const std::string& name) const {
    auto it = namespaces_.find(name);
    return it == namespaces_.end() ? nullptr : &it->second;
}

const NodeObject* Catalog::node(const std::string& name) const {
    auto it = nodes_.find(name);
    return it == nodes_.end() ? nullptr : &it->second;
}

std::string Catalog::withdrawn(const std::string& name) const {
    auto it = withdrawn_.find(name);
    return it == withdrawn_.end() ? "" : it->second;
}

IpSet Catalog::reserved_ips(engine::Family family) const {
    IpSet out(family);
    for (const ReservedIp& r : reserved_) {
        if (r.family != family) continue;
        for (const Interval& i : r.ips.intervals()) out.add(i.first, i.last);
    }
    return out;
}

}  // namespace shmipam::pools
