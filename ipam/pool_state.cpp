#include "ipam/pool_state.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "base/directory.h"
#include "engine/addr/fingerprint.h"

namespace shmipam::ipam {

using engine::Cidr;
using engine::Family;
using engine::IpAddress;
using engine::Range;
using engine::u128;

namespace {

constexpr const char* kPoolsDir = "/_pools";
constexpr const char* kPoolPrefix = "ippool_";
constexpr const char* kSubnetPrefix = "subnet_";
// Index size of a state whose object is gone (it holds at most what this node had).
constexpr u128 kUnknownCapacity = 4096;

std::unique_ptr<engine::NetworkConfig> base_config(const Request& r, const std::string& state) {
    auto cfg = std::make_unique<engine::NetworkConfig>(r.network);
    cfg->name = state;
    cfg->run_dir = r.network.run_dir + kPoolsDir;
    cfg->data_dir = r.network.data_dir + kPoolsDir;
    return cfg;
}

// The index holds this node's attachments of the pool: room for every address of the subnet (a
// pool may grow within it) up to 4096 (an index of 8192 entries, 2 MiB), far above the pods a
// node runs. Sized once, when the state is created.
constexpr int kCapacityBits = 12;
u128 capacity_of(const Cidr& subnet) {
    const int host_bits = subnet.address.bits() - subnet.prefix;
    return u128{1} << std::min(host_bits, kCapacityBits);
}

Range whole(const Cidr& subnet, const std::optional<IpAddress>& gateway) {
    Range r;
    r.subnet = Cidr{subnet.network(), subnet.prefix};
    r.start = subnet.network();
    r.end = subnet.last();
    r.gateway = gateway.value_or(subnet.network());  // the network address: excluded anyway
    return r;
}

}  // namespace

const pools::AddressSpec* object_of(const std::string& state, const pools::Catalog& catalog) {
    if (state.rfind(kPoolPrefix, 0) == 0)
        return catalog.pool(state.substr(std::strlen(kPoolPrefix)));
    if (state.rfind(kSubnetPrefix, 0) == 0) {
        return catalog.subnet(state.substr(std::strlen(kSubnetPrefix)));
    }
    return nullptr;
}

std::string state_name(const pools::Candidate& c) {
    return (c.pool != nullptr ? kPoolPrefix : kSubnetPrefix) + c.name;
}

std::string pool_state_name(const std::string& pool) {
    return kPoolPrefix + pool;
}

std::string pool_state_dir(const std::string& run_dir, const std::string& pool) {
    return run_dir + kPoolsDir + "/" + pool_state_name(pool);
}

std::string object_name_of_state(const std::string& state) {
    for (const std::string_view prefix : {kPoolPrefix, kSubnetPrefix}) {
        if (state.starts_with(prefix)) return state.substr(prefix.size());
    }
    return state;
}

std::vector<std::string> pool_states(const Request& r, const std::vector<std::string>& likely) {
    std::vector<std::string> out;
    const std::string dir = r.network.data_dir + kPoolsDir;
    struct stat st {};
    if (!likely.empty() && ::stat(dir.c_str(), &st) == 0) {
        for (const std::string& name : likely) {
            struct stat sub {};
            if (::stat((dir + "/" + name).c_str(), &sub) == 0 && S_ISDIR(sub.st_mode)) {
                out.push_back(name);
            }
        }
        std::sort(out.begin(), out.end());
        out.erase(std::unique(out.begin(), out.end()), out.end());
        if (!out.empty() && st.st_nlink == 2 + out.size()) return out;
        out.clear();
    }
    base::for_each_entry(dir, [&](std::string_view name) {
        if (name.starts_with(kPoolPrefix) || name.starts_with(kSubnetPrefix))
            out.emplace_back(name);
    });
    std::sort(out.begin(), out.end());
    return out;
}

void allocate_from(engine::NetworkConfig& cfg, const Cidr& subnet,
                   const std::optional<IpAddress>& gateway, const pools::IpSet& allocatable) {
    engine::RangeSet set;
    for (const pools::Interval& i : allocatable.intervals()) {
        Range r = whole(subnet, gateway);
        r.start = IpAddress{i.first, subnet.address.family};
        r.end = IpAddress{i.last, subnet.address.family};
        set.push_back(r);
    }
    cfg.range_sets = {std::move(set)};
    cfg.index_capacity = capacity_of(subnet);
}

std::unique_ptr<engine::NetworkConfig> allocating_config(const Request& r, const std::string& state,
                                                         const Cidr& subnet,
                                                         const std::optional<IpAddress>& gateway,
                                                         const pools::IpSet& allocatable) {
    auto cfg = base_config(r, state);
    allocate_from(*cfg, subnet, gateway, allocatable);
    return cfg;
}

std::unique_ptr<engine::NetworkConfig> reading_config(const Request& r, const std::string& state,
                                                      const pools::Catalog& catalog) {
    auto cfg = base_config(r, state);
    if (const pools::AddressSpec* o = object_of(state, catalog)) {
        cfg->range_sets = {{whole(o->subnet, o->gateway)}};
        cfg->index_capacity = capacity_of(o->subnet);
        // The whole subnet is for reading and releasing; shmipamctl ls keeps showing the ranges
        // the pool allocates from.
        cfg->display = engine::NetworkConfig::Display::kKeep;
        return cfg;
    }
    // The object is gone from poolsDir: its addresses are still released, with host prefixes.
    engine::RangeSet any;
    for (Family f : {Family::kV4, Family::kV6}) {
        const IpAddress zero{0, f};
        Range r;
        r.subnet = Cidr{zero, zero.bits()};
        r.start = zero;
        r.end = IpAddress{zero.max_value(), f};
        r.gateway = zero;
        any.push_back(r);
    }
    cfg->range_sets = {std::move(any)};
    cfg->index_capacity = kUnknownCapacity;
    cfg->display = engine::NetworkConfig::Display::kWithdrawn;
    return cfg;
}

uint64_t network_tag(const std::string& network_name) {
    const uint64_t h = engine::fingerprint(network_name, "").fp1 & ((uint64_t{1} << 48) - 1);
    return h == 0 ? 1 : h;
}

}  // namespace shmipam::ipam
