// shmipamctl cluster pass (docs/cluster.md, "The node pass"): a node learns within one period
// that a block was taken from it (a gc, a store restored by hand) and stops serving from it,
// even when none of its ADDs runs a helper; it adopts a block the store gives it that its cache
// lacks, heals what dead invocations left in its pool states, reports fixed claims its
// sandboxes use while the store says otherwise, and gives idle blocks back to waiting nodes.
// Off the allocation path: a node that never runs it is only slower to notice (its first ADD
// since boot, and each block claim, rewrite the cache from the store too).
#include <unistd.h>

#include <csignal>
#include <ctime>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "cluster/block_cache.h"
#include "cluster/cluster_identity.h"
#include "cluster/etcd_config.h"
#include "cluster/fixed_claims.h"
#include "cluster/node_files.h"
#include "cluster/node_pass.h"
#include "cluster/revision_floor.h"
#include "engine/recovery/recovery.h"
#include "pools/pool_dir.h"
#include "tools/cluster_node_use.h"
#include "tools/cluster_setup.h"
#include "tools/render/cluster.h"
#include "tools/render/json.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

// What a dead invocation or helper left in the pool's states on this node is healed (the
// engine's sweep, as shmipamctl repair does): above all slots a helper killed after giving a
// block back held in a block the node no longer lists, which no ADD would scan again. A cluster
// pool's name may be a SpiderIPPool's state or a subnet annotation's: both are swept.
Expected<std::optional<PassRow>> heal_pool_state(const ClusterSetup& setup,
                                                 const std::string& pool) {
    uint64_t slots = 0, entries = 0;
    for (const char* kind : {"pool/", "subnet/"}) {
        auto store = open_network(setup.run_dir, kind + pool, shm::Access::kReadWrite);
        if (!store) continue;  // no such state of the pool on this node
        (*store)->act_as_invocation();
        auto swept = engine::sweep(**store);
        if (!swept) return swept.error();
        slots += swept->slots_healed;
        entries += swept->entries_healed;
    }
    if (slots == 0 && entries == 0) return std::optional<PassRow>{};
    return std::optional<PassRow>{
        PassRow{pool, std::to_string(slots) + " slots, " + std::to_string(entries) + " attachments",
                PassRow::Action::kHealed}};
}

// Whether the store holds anything of this node: a block, or a fixed claim.
Expected<bool> store_knows_node(const ClusterSetup& setup, const StoreView& view) {
    for (const auto& [pool, blocks] : view.blocks) {
        for (const auto& b : blocks) {
            if (b.node == setup.node) return true;
        }
    }
    auto claims = cluster::FixedClaims(*view.store, cluster::etcd_prefix(setup.etcd)).everywhere();
    if (!claims) return claims.error();
    for (const auto& [pool, c] : *claims) {
        if (c.node == setup.node) return true;
    }
    return false;
}

// Whether the pass may act on this node's files: the dataDir the config names holds the
// cluster id the node's helper pinned, and it is the store's. The pass never writes it: a
// dataDir without it is not the one the node's plugin uses (in a container, a mount missing or
// at another path), and acting there would drop every block as lost or adopt them into a
// directory no plugin reads. False, with nothing to do, when neither it nor the store knows
// the node yet.
Expected<bool> node_files_trusted(const ClusterSetup& setup, const StoreView& view) {
    const std::string dir = setup.state_dir();
    if (cluster::has_cluster_id(dir)) {
        if (auto st = cluster::check_cluster_id(dir, view.store->last_header().cluster_id); !st) {
            Error e = st.error();
            e.msg = "dataDir " + setup.data_dir + ": " + e.msg +
                    " (if the pass runs in a container, is the node's dataDir mounted at this "
                    "path?); refusing to act on this network";
            return e;
        }
        return true;
    }
    auto known = store_knows_node(setup, view);
    if (!known) return known.error();
    if (!*known && cluster::cached_pools(dir).empty())
        return false;  // a node that has claimed nothing
    return make_error(
        Code::kInvalidConfig,
        cluster::cluster_id_path(dir) + " is missing while the store gives node " + setup.node +
            " blocks or claims: the dataDir the config names (" + setup.data_dir +
            ") is not the one the node's plugin uses, or is not mounted at that path in the "
            "pass's container; refusing to act on this network (its blocks would look lost, or "
            "be adopted into a directory no plugin reads)");
}

// The names the node's pool files configure (pools and subnets, and those a bad file took out of
// service: still meant to be there), or nullopt when that cannot be told for sure (no poolsDir,
// one unreadable, a file that did not decode): then no pool is taken as removed.
std::optional<std::set<std::string>> configured_names(const ClusterSetup& setup) {
    if (setup.pools_dir.empty()) return std::nullopt;
    auto catalog = pools::load_pools_dir(setup.pools_dir);
    if (!catalog || !catalog->problems().empty()) return std::nullopt;
    std::set<std::string> out;
    for (const auto& p : catalog->pools()) out.insert(p.name);
    for (const auto& s : catalog->subnets()) out.insert(s.name);
    return out;
}

// One node pass over every pool the node caches or the store gives it blocks of, and the fixed
// pools' claims. An error in one pool is that pool's row (kFailed); the others are passed.
Expected<std::vector<PassRow>> node_pass(const ClusterSetup& setup) {
    // The cluster id is judged below, with what it means for the pass.
    auto view = read_store(setup, cluster::Guards{cluster::Guards::ClusterId::kIgnore});
    if (!view) return view.error();
    // Which cluster answers, and whether these are the node's files, before any is rewritten.
    auto trusted = node_files_trusted(setup, *view);
    if (!trusted) return trusted.error();
    if (!*trusted) return std::vector<PassRow>{};
    const cluster::NodeFiles files{setup.state_dir(), setup.run_dir + "/_cluster"};
    std::set<std::string> pools = cluster::cached_pools(files.state_dir);
    for (const auto& [pool, blocks] : view->blocks) {
        for (const auto& b : blocks) {
            if (b.node == setup.node) pools.insert(pool);
        }
    }
    auto cfg = cluster::etcd_config_from_json(setup.etcd);
    if (!cfg) return cfg.error();
    const cluster::PassNode node{setup.node, files, setup.block_min_age_s,
                                 cluster::kLockWaitBudgets * cfg->budget_ms};
    NodeStates side(setup.run_dir, setup.data_dir);
    std::vector<PassRow> out;
    const auto failed = [&](const std::string& pool, const Error& e) {
        PassRow row{pool, "", PassRow::Action::kFailed};
        row.why = e.msg;
        out.push_back(std::move(row));
    };
    const std::optional<std::set<std::string>> configured = configured_names(setup);
    for (const auto& pool : pools) {
        auto healed = heal_pool_state(setup, pool);
        if (!healed) {
            failed(pool, healed.error());
            continue;
        }
        if (*healed) out.push_back(std::move(**healed));
        auto rows = cluster::pass_pool(*view->store, node, side, pool,
                                       !configured || configured->count(pool) != 0);
        if (!rows) {
            failed(pool, rows.error());
            continue;
        }
        out.insert(out.end(), rows->begin(), rows->end());
    }
    for (const auto& pool : setup.fixed_pools) {
        // Under the pool lock, as the node's takes and give-ups are: a local claim read has its
        // store claim in the read after it, unless another node took it or it went by hand.
        auto lock = cluster::PoolLock::acquire(files.lock(pool), node.lock_wait_ms);
        auto rows = lock ? cluster::moved_claims(*view->store, view->store->prefix(), setup.node,
                                                 side, pool)
                         : Expected<std::vector<PassRow>>(lock.error());
        if (!rows) {
            failed(pool, rows.error());
            continue;
        }
        out.insert(out.end(), rows->begin(), rows->end());
    }
    // The store passed the revision guard (read_store) and these are the node's files: the
    // node remembers the highest revision seen, as its helpers do.
    if (auto st = view->store->remember_revision(); !st) return st.error();
    return out;
}

}  // namespace

int cmd_cluster_pass(const CommonOptions& common, const ClusterPassOptions& o) {
    // The config is read at every pass: a DaemonSet's ConfigMap may turn cluster mode on (or
    // off) while the loop runs. A failure is said once, not every period, until it changes.
    std::string last_failure;
    const auto failed = [&](const Error& e) {
        if (e.msg != last_failure || o.every_s <= 0) (void)cannot_read(e);
        last_failure = e.msg;
        return kExitCannotRead;
    };
    const auto once = [&]() -> int {
        auto setup = read_setup(o.config, "", common.run_dir);
        if (!setup) return failed(setup.error());
        auto rows = node_pass(*setup);
        if (!rows) return failed(rows.error());
        if (!o.textfile_dir.empty()) {
            std::set<std::string> pools(setup->fixed_pools.begin(), setup->fixed_pools.end());
            for (const auto& r : *rows) pools.insert(r.pool);
            for (const auto& p : cluster::cached_pools(setup->state_dir())) pools.insert(p);
            const std::string text = cluster_pass_metrics(
                setup->node, *rows, {pools.begin(), pools.end()}, uint64_t(std::time(nullptr)));
            if (auto st = write_textfile(o.textfile_dir, "shmipam_cluster.prom", text); !st) {
                return failed(st.error());
            }
        }
        std::cout << (common.json ? json_text(cluster_pass_json(setup->node, *rows))
                                  : cluster_pass_text(setup->node, *rows));
        std::cout.flush();
        // Each pool's error on stderr too (once per change in a loop), and the exit says so.
        std::string pool_failures;
        for (const auto& r : *rows) {
            if (r.action == PassRow::Action::kFailed) {
                pool_failures += "cluster pass: pool " + r.pool + ": " + r.why + "\n";
            }
        }
        if (!pool_failures.empty()) {
            if (pool_failures != last_failure || o.every_s <= 0) std::cerr << pool_failures;
            last_failure = pool_failures;
            return kExitCannotRead;
        }
        last_failure.clear();
        for (const auto& r : *rows) {
            if ((r.action == PassRow::Action::kDropped && r.in_use != 0) ||
                r.action == PassRow::Action::kMoved) {
                return kExitViolations;
            }
        }
        return kExitClean;
    };
    if (o.every_s <= 0) return once();
    // --every: the loop of a DaemonSet container (often its PID 1, which gets no SIGTERM
    // without a handler) or a systemd service: stopped at once, between two passes or inside
    // one (a cache is replaced by a rename, never left half written).
    struct sigaction stop {};
    stop.sa_handler = [](int) { ::_exit(0); };
    ::sigaction(SIGTERM, &stop, nullptr);
    ::sigaction(SIGINT, &stop, nullptr);
    for (;;) {
        (void)once();
        std::this_thread::sleep_for(std::chrono::duration<double>(o.every_s));
    }
}

}  // namespace shmipam::tools
