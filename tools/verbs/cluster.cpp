// shmipamctl cluster ls / cluster gc (docs/cluster.md, "Operating it"): the cluster store's
// blocks beside this node's block cache and arenas, and the release of the blocks of nodes that
// no longer exist. Both read the etcd settings, node name and directories from the network
// config the node's plugin uses (--config, tools/cluster_setup.h). The node pass is
// cluster_pass.cpp's.
#include "tools/render/cluster.h"

#include <algorithm>
#include <ctime>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "cluster/block_cache.h"
#include "cluster/block_store.h"
#include "cluster/cluster_gc.h"
#include "cluster/etcd_config.h"
#include "cluster/fixed_claims.h"
#include "cluster/node_files.h"
#include "cluster/node_name.h"
#include "cluster/waiting.h"
#include "tools/cluster_node_use.h"
#include "tools/cluster_setup.h"
#include "tools/render/json.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

using nlohmann::json;

namespace {

// Addresses in use per block (of `prefix`) in this node's states of `pool` (a SpiderIPPool's or
// a subnet annotation's); none without one.
std::map<std::string, uint64_t> local_use(const ClusterSetup& s, const std::string& pool,
                                          int prefix) {
    std::map<std::string, uint64_t> out;
    for (const auto& [block, use] :
         NodeStates(s.run_dir, s.data_dir).pool_use(pool, prefix).blocks) {
        out[block] = use.in_use;
    }
    return out;
}

// What cluster ls reports beside the blocks: waiting nodes, idle blocks, moved fixed claims.
Expected<ClusterLsNotes> ls_notes(const ClusterSetup& setup, StoreView& view,
                                  const std::map<std::string, int>& pools) {
    ClusterLsNotes notes;
    notes.unreadable = view.unreadable;
    cluster::Waiting waiting(*view.store, cluster::etcd_prefix(setup.etcd));
    const uint64_t now = uint64_t(std::time(nullptr));
    std::set<std::string> names;
    for (const auto& [pool, blocks] : view.blocks) names.insert(pool);
    for (const auto& [pool, prefix] : pools) names.insert(pool);
    for (const auto& pool : names) {
        auto waiters = waiting.waiters(pool, now);
        if (!waiters) return waiters.error();
        for (const auto& w : *waiters) {
            notes.waiting.push_back({pool, w.node, now > w.last_unix_s ? now - w.last_unix_s : 0});
        }
        auto idle = waiting.idle(pool);
        if (!idle) return idle.error();
        for (const auto& i : *idle) {
            notes.idle.push_back({pool, i.block.to_string(), i.node,
                                  now > i.since_unix_s ? now - i.since_unix_s : 0});
        }
    }
    for (const auto& pool : setup.fixed_pools) {
        NodeStates side(setup.run_dir, setup.data_dir);
        auto moved =
            cluster::moved_claims(*view.store, view.store->prefix(), setup.node, side, pool);
        if (!moved) return moved.error();
        for (const auto& m : *moved) {
            notes.moved.push_back({pool, m.block, m.owner, m.container, m.why});
        }
    }
    return notes;
}

}  // namespace

int cmd_cluster_ls(const CommonOptions& common, const ClusterLsOptions& o) {
    auto setup = read_setup(o.config, o.node, common.run_dir);
    if (!setup) return cannot_read(setup.error());
    // A reader: the store of another cluster is shown as it is.
    auto view = read_store(*setup, cluster::Guards{cluster::Guards::ClusterId::kIgnore});
    if (!view) return cannot_read(view.error());
    auto* in_store = &view->blocks;

    // (pool, block) -> row; the store's blocks first, then this node's cache and arenas.
    std::map<std::pair<std::string, std::string>, ClusterBlockRow> rows;
    std::map<std::string, int> prefix_of;  // pool -> block prefix
    for (const auto& [pool, blocks] : *in_store) {
        for (const auto& b : blocks) {
            auto& r = rows[{pool, b.cidr.to_string()}];
            r.pool = pool;
            r.block = b.cidr.to_string();
            r.owner = b.node;
            prefix_of[pool] = b.cidr.prefix;
        }
    }
    const std::string cache_dir = setup->data_dir + "/_cluster";
    for (const std::string& pool : cluster::cached_pools(cache_dir)) {
        auto cached = cluster::read_block_cache(cluster::block_cache_path(cache_dir, pool));
        if (!cached) continue;
        for (const auto& b : *cached) {
            auto& r = rows[{pool, b.cidr.to_string()}];
            r.pool = pool;
            r.block = b.cidr.to_string();
            r.cached = true;
            prefix_of[pool] = b.cidr.prefix;
        }
    }
    for (const auto& [pool, prefix] : prefix_of) {
        for (const auto& [block, use] : local_use(*setup, pool, prefix)) {
            // An empty arena block nobody owns or caches says nothing.
            if (use == 0 && rows.count({pool, block}) == 0) continue;
            auto& r = rows[{pool, block}];
            r.pool = pool;
            r.block = block;
            r.local_use = use;
        }
    }
    std::vector<ClusterBlockRow> out;
    std::vector<std::pair<std::string, ClusterBlockRow*>> ordered;
    for (auto& [key, r] : rows) ordered.emplace_back(key.first, &r);
    // By pool, then by address (10.0.0.64 before 10.0.0.128).
    const auto value = [](const ClusterBlockRow* r) {
        auto c = engine::Cidr::parse(r->block);
        return c ? std::pair{int(c->address.family), c->address.value}
                 : std::pair{0, engine::u128{0}};
    };
    std::sort(ordered.begin(), ordered.end(), [&](const auto& a, const auto& b) {
        return a.first != b.first ? a.first < b.first : value(a.second) < value(b.second);
    });
    for (auto& [pool, row] : ordered) {
        ClusterBlockRow& r = *row;
        const bool mine = r.owner == setup->node;
        const bool in_use_here = r.local_use && *r.local_use > 0;
        if (mine && !r.cached) {
            r.problem =
                "owned in the store but not in this node's cache (a helper died after "
                "claiming it; the next helper run adopts it)";
        } else if (!mine && r.cached) {
            r.problem = r.owner.empty()
                            ? "in this node's cache but owned by no node in the store"
                            : "in this node's cache but owned by " + r.owner + " in the store";
        } else if (!mine && in_use_here) {
            r.problem = "addresses in use here in a block this node does not own";
        }
        if (!r.problem.empty() && in_use_here && !mine) {
            r.problem += ": the same address may be given on two nodes";
        }
        out.push_back(std::move(r));
    }
    auto notes = ls_notes(*setup, *view, prefix_of);
    if (!notes) return cannot_read(notes.error());
    size_t problems = notes->moved.size() + notes->unreadable.size();
    for (const auto& r : out) problems += !r.problem.empty();
    std::cout << (common.json ? json_text(cluster_ls_json(setup->node, out, *notes))
                              : cluster_ls_text(setup->node, out, *notes));
    return problems == 0 ? kExitClean : kExitViolations;
}

// The store is read before the node list is taken, and every delete compares the revision read:
// a block claimed after the store was read is never seen, one claimed after the list was taken
// or within blockMinAgeS is kept, and one claimed again meanwhile is left. So a gc never races
// a live node, whatever the list's age.
int cmd_cluster_gc(const CommonOptions& common, const ClusterGcOptions& o) {
    if (!o.claim.empty() &&
        (o.claim.find('/') == std::string::npos || o.claim.find('/') != o.claim.rfind('/') ||
         o.claim.front() == '/' || o.claim.back() == '/')) {
        return cannot_read("--claim " + o.claim + ": give the pod as NAMESPACE/NAME");
    }
    auto setup = read_setup(o.config, "", common.run_dir);
    if (!setup) return cannot_read(setup.error());
    // gc writes: the store is checked against this node's cluster id too, when it has one.
    auto view = read_store(*setup, cluster::Guards{});
    if (!view) return cannot_read(view.error());
    cluster::GcPlan plan;
    plan.blocks = view->blocks;
    auto claims = cluster::FixedClaims(*view->store, view->store->prefix()).everywhere();
    if (!claims) return cannot_read(claims.error());
    plan.claims = std::move(*claims);
    // The list is taken after the store was read (cluster/cluster_gc.h says why).
    plan.list_taken_at = std::time(nullptr);
    auto live = read_live_nodes(o.live_nodes);
    if (!live) return cannot_read(live.error());
    plan.live_nodes = std::move(*live);
    plan.block_min_age_s = setup->block_min_age_s;
    plan.named_pod = o.claim;
    plan.apply = o.apply;
    plan.force = o.force;
    auto rows = cluster::collect_garbage(*view->store, plan, std::time(nullptr));
    if (!rows) return cannot_read(rows.error());
    std::cout << (common.json ? json_text(cluster_gc_json(*rows, o.apply))
                              : cluster_gc_text(*rows, o.apply));
    size_t releasable = 0;
    for (const auto& r : *rows) releasable += r.kept.empty();
    return !o.apply && releasable != 0 ? kExitViolations : kExitClean;
}

}  // namespace shmipam::tools
