#include "ipam/operations.h"

#include <memory>

#include "ipam/cluster_source.h"
#include "ipam/local_source.h"
#include "ipam/owner_claims.h"
#include "ipam/pod_lookup.h"
#include "ipam/pool_catalog.h"
#include "ipam/pool_mode.h"
#include "ipam/ranges_mode.h"
#include "kube/pod_protocol.h"

namespace shmipam::ipam {

std::unique_ptr<AddressSource> make_source(const Request& r) {
    if (r.pools->cluster) return std::make_unique<ClusterSource>(r);
    return std::make_unique<LocalSource>();
}

namespace {

// Runs `op` over the pools catalog, which is kept until the process exits.
template <typename Op>
auto with_catalog(const Request& r, Upkeep& upkeep, Op op)
    -> decltype(op(std::declval<const pools::Catalog&>())) {
    auto catalog = load_catalog(r);
    if (!catalog) return catalog.error();
    upkeep.keep_until_exit.push_back(*catalog);
    return op(**catalog);
}

// An ADD whose pod the API server could not give: the pod's exact-name claim this node holds is
// bound (a node rebooted during an API outage brings its StatefulSet pods back with their
// addresses), and the log says so; otherwise, and on any other error, the API server's error.
Expected<AddResult> add_without_api(const Request& r, const pools::Catalog& c, const Error& api,
                                    Upkeep& upkeep) {
    if (api.code != Code::kTryAgainLater || api.details != kube::protocol::kApiUnavailableDetails) {
        return api;
    }
    auto bound = pool_bind_held_claim(r, c, *make_source(r), upkeep);
    if (!bound) return bound.error();
    if (!*bound) return api;
    if (r.log_aside) {
        std::string where;
        for (const auto& p : (*bound)->pools) where += (where.empty() ? "" : ", ") + p;
        r.log_aside("ADD-OFFLINE",
                    Error{api.code,
                          "bound the claim " + (*bound)->claim + " this node holds (" + where +
                              ") without the API server: " + api.msg,
                          api.details});
    }
    return std::move((*bound)->result);
}

}  // namespace

Expected<AddResult> add(const Request& r, Upkeep& upkeep) {
    if (!r.pools) {
        if (!needs_pod_from_api(r, nullptr)) return ranges_add(r, upkeep);
        auto read = with_pod_from_api(r);
        if (!read) return read.error();
        return ranges_add(*read, upkeep);
    }
    auto out = with_catalog(r, upkeep, [&](const pools::Catalog& c) -> Expected<AddResult> {
        if (!needs_pod_from_api(r, &c)) return pool_add(r, c, *make_source(r), upkeep);
        // The pod as the API server gives it, for the whole ADD (the source reads it too).
        auto read = with_pod_from_api(r);
        if (!read) return add_without_api(r, c, read.error(), upkeep);
        return pool_add(*read, c, *make_source(*read), upkeep);
    });
    schedule_owner_recheck(r, upkeep);
    return out;
}

Status del(const Request& r, Upkeep& upkeep) {
    if (!r.pools) return ranges_del(r, upkeep);
    Status done = with_catalog(r, upkeep, [&](const pools::Catalog& c) {
        return pool_del(r, c, *make_source(r), upkeep);
    });
    schedule_owner_recheck(r, upkeep);
    return done;
}

Status check(const Request& r, Upkeep& upkeep) {
    if (!r.pools) return ranges_check(r, upkeep);
    return with_catalog(r, upkeep, [&](const pools::Catalog& c) {
        return pool_check(r, c, *make_source(r), upkeep);
    });
}

Status gc(const Request& r, Upkeep& upkeep) {
    if (!r.pools) return ranges_gc(r, upkeep);
    return with_catalog(
        r, upkeep, [&](const pools::Catalog& c) { return pool_gc(r, c, *make_source(r), upkeep); });
}

Status status(const Request& r, Upkeep& upkeep) {
    if (!r.pools) return ranges_status(r, upkeep);
    return with_catalog(r, upkeep, [&](const pools::Catalog& c) { return pool_status(r, c); });
}

}  // namespace shmipam::ipam
