#include "ipam/operations.h"

#include <memory>

#include "ipam/cluster_source.h"
#include "ipam/local_source.h"
#include "ipam/pool_catalog.h"
#include "ipam/pool_mode.h"
#include "ipam/ranges_mode.h"

namespace shmipam::ipam {

namespace {

// Where this node may allocate in its pools: the cluster's blocks when ipam.etcd is set.
std::unique_ptr<AddressSource> source_for(const Request& r) {
    if (r.pools->cluster) return std::make_unique<ClusterSource>(r);
    return std::make_unique<LocalSource>();
}

// Runs `op` over the pools catalog, which is kept until the process exits.
template <typename Op>
auto with_catalog(const Request& r, Upkeep& upkeep, Op op)
    -> decltype(op(std::declval<const pools::Catalog&>())) {
    auto catalog = load_catalog(r);
    if (!catalog) return catalog.error();
    upkeep.keep_until_exit.push_back(*catalog);
    return op(**catalog);
}

}  // namespace

Expected<AddResult> add(const Request& r, Upkeep& upkeep) {
    if (!r.pools) return ranges_add(r, upkeep);
    return with_catalog(
        r, upkeep, [&](const pools::Catalog& c) { return pool_add(r, c, *source_for(r), upkeep); });
}

Status del(const Request& r, Upkeep& upkeep) {
    if (!r.pools) return ranges_del(r, upkeep);
    return with_catalog(
        r, upkeep, [&](const pools::Catalog& c) { return pool_del(r, c, *source_for(r), upkeep); });
}

Status check(const Request& r, Upkeep& upkeep) {
    if (!r.pools) return ranges_check(r, upkeep);
    return with_catalog(r, upkeep, [&](const pools::Catalog& c) {
        return pool_check(r, c, *source_for(r), upkeep);
    });
}

Status gc(const Request& r, Upkeep& upkeep) {
    if (!r.pools) return ranges_gc(r, upkeep);
    return with_catalog(
        r, upkeep, [&](const pools::Catalog& c) { return pool_gc(r, c, *source_for(r), upkeep); });
}

Status status(const Request& r, Upkeep& upkeep) {
    if (!r.pools) return ranges_status(r, upkeep);
    return with_catalog(r, upkeep, [&](const pools::Catalog& c) { return pool_status(r, c); });
}

}  // namespace shmipam::ipam
