// shmipamctl cluster ls / cluster gc (docs/cluster.md, "Operating it"): the cluster store's
// blocks beside this node's block cache and arenas, and the release of the blocks of nodes that
// no longer exist. Both read the etcd settings, node name and directories from the network
// config the node's plugin uses (--config).
#include "tools/render/cluster.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "base/directory.h"
#include "cluster/block_cache.h"
#include "cluster/block_store.h"
#include "cluster/cluster_identity.h"
#include "cluster/etcd_config.h"
#include "cluster/fixed_claims.h"
#include "cluster/node_name.h"
#include "cluster/node_files.h"
#include "cluster/waiting.h"
#include "engine/addr/fingerprint.h"
#include "engine/inspect/inspect.h"
#include "engine/recovery/recovery.h"
#include "ipam/pool_config.h"
#include "ipam/pool_state.h"
#include "tools/cluster_release.h"
#include "tools/render/json.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

using nlohmann::json;

namespace {

struct ClusterSetup {
    json etcd;
    std::string node, data_dir, run_dir;
    uint64_t block_min_age_s = 300;     // ipam.blockMinAgeS
    std::set<std::string> fixed_pools;  // ipam.fixedAddressPools
};

// The ipam section holding "etcd" in a network config or conflist (its "plugins"). The node is
// `node`, else the config's nodeName, else the host name; the run directory is the config's
// runDir, else `run_dir`.
Expected<ClusterSetup> read_setup(const std::string& config, const std::string& node,
                                  const std::string& run_dir) {
    auto config_text = read_input(config);
    if (!config_text) return config_text.error();
    const json doc = json::parse(*config_text, nullptr, false);
    const json* ipam = nullptr;
    if (doc.is_object() && doc.contains("ipam") && doc["ipam"].is_object()) ipam = &doc["ipam"];
    if (doc.is_object() && doc.contains("plugins") && doc["plugins"].is_array()) {
        for (const auto& p : doc["plugins"]) {
            if (p.is_object() && p.contains("ipam") && p["ipam"].is_object() &&
                p["ipam"].contains("etcd")) {
                ipam = &p["ipam"];
            }
        }
    }
    if (ipam == nullptr || !ipam->contains("etcd")) {
        return make_error(Code::kInvalidConfig,
                          config +
                              " is not a network config whose ipam section has \"etcd\" "
                              "(docs/cluster.md)");
    }
    ClusterSetup s;
    s.etcd = (*ipam)["etcd"];
    const auto text = [&](const char* k, const std::string& dflt) {
        return ipam->contains(k) && (*ipam)[k].is_string() ? (*ipam)[k].get<std::string>() : dflt;
    };
    // The node's name as the plugin knows it: never the host name (ipam/pool_config.h).
    s.node = !node.empty() ? node : text("nodeName", "");
    if (s.node.empty()) {
        auto named = ipam::read_node_name_file(text("nodeNameFile", ipam::kDefaultNodeNameFile));
        if (!named) return named.error();
        s.node = *named;
    }
    if (auto why = cluster::node_name_problem(s.node); !why.empty()) {
        return make_error(Code::kInvalidConfig, "the node's name: " + why);
    }
    s.data_dir = text("dataDir", "/var/lib/cni/networks");
    s.run_dir = text("runDir", run_dir);
    if (auto a = ipam->find("blockMinAgeS"); a != ipam->end() && a->is_number_unsigned()) {
        s.block_min_age_s = a->get<uint64_t>();
    }
    if (auto f = ipam->find("fixedAddressPools"); f != ipam->end() && f->is_array()) {
        for (const auto& n : *f) {
            if (n.is_string()) s.fixed_pools.insert(n.get<std::string>());
        }
    }
    return s;
}

// Addresses in use per block (of `prefix`) in this node's arena of `pool`; none without one.
std::map<std::string, uint64_t> local_use(const ClusterSetup& s, const std::string& pool,
                                          int prefix) {
    std::map<std::string, uint64_t> out;
    auto store = open_network(s.run_dir, "pool/" + pool, shm::Access::kReadOnly);
    if (!store) return out;
    auto d = engine::dump(**store);
    if (!d) return out;
    for (const auto& b : d->blocks) {
        auto c = engine::Cidr::parse(b.cidr);
        if (c)
            out[engine::Cidr{c->address, prefix}.network().to_string() + "/" +
                std::to_string(prefix)] += 0;
    }
    for (const auto& slot : d->slots) {
        if (slot.state == "cooling") continue;
        out[engine::Cidr{slot.address, prefix}.network().to_string() + "/" +
            std::to_string(prefix)] += 1;
    }
    return out;
}

// Node names from a file (or - for stdin): a JSON list of names, a Kubernetes NodeList
// (`kubectl get nodes -o json`), or one name per line. Anything else is refused, never read
// as names: a gc with the wrong list releases the blocks of nodes that run.
Expected<std::set<std::string>> live_nodes(const std::string& path) {
    auto input = read_input(path);
    if (!input) return input.error();
    const std::string& text = *input;
    std::set<std::string> out;
    const size_t start = text.find_first_not_of(" \t\r\n");
    const bool looks_json =
        start != std::string::npos && (text[start] == '{' || text[start] == '[');
    const auto bad = [](const std::string& why) {
        return make_error(Code::kDecode,
                          "--live-nodes: " + why +
                              " (give a JSON list of names, `kubectl get nodes -o json`, or one "
                              "name per line)");
    };
    if (looks_json) {
        const json doc = json::parse(text, nullptr, false);
        if (doc.is_discarded()) return bad("not valid JSON (cut short?)");
        if (doc.is_array()) {
            for (const auto& n : doc) {
                if (!n.is_string()) return bad("a list holding something other than names");
                out.insert(n.get<std::string>());
            }
        } else if (doc.contains("items") && doc["items"].is_array()) {
            for (const auto& n : doc["items"]) {
                if (!n.is_object() || !n.contains("metadata") || !n["metadata"].is_object() ||
                    !n["metadata"].contains("name") || !n["metadata"]["name"].is_string()) {
                    return bad("an item without metadata.name");
                }
                out.insert(n["metadata"]["name"].get<std::string>());
            }
        } else {
            return bad("a JSON object that is not a list of Nodes");
        }
    } else {
        std::istringstream lines(text);
        for (std::string l; std::getline(lines, l);) {
            while (!l.empty() && (l.back() == ' ' || l.back() == '\r' || l.back() == '\t')) {
                l.pop_back();
            }
            if (!l.empty()) out.insert(l);
        }
    }
    for (const auto& n : out) {
        if (!cluster::is_node_name(n)) return bad("\"" + n + "\" is not a node name");
    }
    return out;
}

// The store's client for the config's etcd, and every pool's blocks as it says now.
// The pools this node caches blocks of: <dataDir>/_cluster/<pool>.blocks.
std::set<std::string> cached_pools(const std::string& cache_dir) {
    std::set<std::string> out;
    (void)base::for_each_entry(cache_dir, [&](std::string_view name) {
        const std::string n(name);
        if (n.size() > 7 && n.compare(n.size() - 7, 7, ".blocks") == 0) {
            out.insert(n.substr(0, n.size() - 7));
        }
    });
    return out;
}

struct StoreView {
    std::unique_ptr<cluster::EtcdClient> etcd;
    std::map<std::string, std::vector<cluster::Block>> blocks;
    std::vector<std::string> unreadable;  // keys of block values that do not parse
};
Expected<StoreView> read_store(const ClusterSetup& setup) {
    auto cfg = cluster::etcd_config_from_json(setup.etcd);
    if (!cfg) return cfg.error();
    StoreView v{std::make_unique<cluster::EtcdClient>(*cfg), {}};
    auto all =
        cluster::BlockStore(*v.etcd, cluster::etcd_prefix(setup.etcd)).all_blocks(&v.unreadable);
    if (!all) return all.error();
    v.blocks = std::move(*all);
    return v;
}

}  // namespace

// What cluster ls reports beside the blocks (ClusterLsNotes); defined with the node pass.
Expected<ClusterLsNotes> ls_notes(const ClusterSetup& setup, StoreView& view,
                                  const std::map<std::string, int>& pools);

int cmd_cluster_ls(const CommonOptions& common, const ClusterLsOptions& o) {
    auto setup = read_setup(o.config, o.node, common.run_dir);
    if (!setup) return cannot_read(setup.error());
    auto view = read_store(*setup);
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
    for (const std::string& pool : cached_pools(cache_dir)) {
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

namespace {

// No node shut out (docs/cluster.md): the node's blocks with no address in use are recorded idle
// in the store (and the record cleared when one is in use again); while another node waits for
// a block, one idle block of this node older than blockMinAgeS is given back, even its last.
Expected<std::optional<PassRow>> give_back_for_waiters(
    const ClusterSetup& setup, cluster::BlockStore& store, cluster::Waiting& waiting,
    const cluster::NodeFiles& files, const std::string& pool,
    const std::vector<cluster::OwnedBlock>& mine) {
    if (mine.empty()) return std::optional<PassRow>{};
    const auto use = local_use(setup, pool, mine.front().cidr.prefix);
    auto idle = waiting.idle(pool);
    if (!idle) return idle.error();
    std::map<std::string, uint64_t> idle_since;  // this node's idle records
    for (const auto& i : *idle) {
        if (i.node == setup.node) idle_since[i.block.to_string()] = i.since_unix_s;
    }
    std::vector<cluster::OwnedBlock> idle_now;
    for (const auto& m : mine) {
        const auto u = use.find(m.cidr.to_string());
        const bool in_use = u != use.end() && u->second != 0;
        const bool recorded = idle_since.count(m.cidr.to_string()) != 0;
        if (in_use && recorded) {
            if (auto st = waiting.clear_idle(pool, m.cidr); !st) return st.error();
        } else if (!in_use && !recorded) {
            if (auto st = waiting.mark_idle(pool, m.cidr, setup.node); !st) return st.error();
        } else if (!in_use) {
            idle_now.push_back(m);
        }
    }
    const uint64_t now = uint64_t(std::time(nullptr));
    auto waiters = waiting.waiters(pool, now);
    if (!waiters) return waiters.error();
    std::vector<std::string> others;
    for (const auto& w : *waiters) {
        if (w.node != setup.node) others.push_back(w.node);
    }
    if (others.empty()) return std::optional<PassRow>{};
    for (const auto& m : idle_now) {
        if (idle_since[m.cidr.to_string()] + setup.block_min_age_s > now) continue;
        auto owned = store.blocks(pool);
        if (!owned) return owned.error();
        const cluster::protocol::ReleaseBlock req{{setup.etcd, pool, setup.node, files.state_dir},
                                                  m.cidr,
                                                  ipam::pool_state_dir(setup.run_dir, pool),
                                                  setup.block_min_age_s,
                                                  /*even_last=*/true};
        auto released = cluster_helper::release_block(req, store, *owned);
        if (!released) return released.error();
        if (!released->released) continue;
        if (auto st = waiting.clear_idle(pool, m.cidr); !st) return st.error();
        return std::optional<PassRow>{
            PassRow{pool, m.cidr.to_string(), PassRow::Action::kGaveBack, 0, "", others}};
    }
    return std::optional<PassRow>{};
}

// One pass over one pool, under the pool lock (helpers write the cache under it too): the cache
// rewritten to what the store gives the node, and what changed.
Expected<std::vector<PassRow>> pass_pool(const ClusterSetup& setup, cluster::BlockStore& store,
                                         cluster::Waiting& waiting, const cluster::NodeFiles& files,
                                         const std::string& pool, uint64_t lock_wait_ms) {
    auto lock = cluster::PoolLock::acquire(files.lock(pool), lock_wait_ms);
    if (!lock) return lock.error();
    auto cached = cluster::read_block_cache(files.block_cache(pool));
    if (!cached) return cached.error();
    auto in_store = store.blocks(pool);
    if (!in_store) return in_store.error();
    std::vector<cluster::OwnedBlock> mine;
    std::map<std::string, std::string> owner_of;
    for (const auto& b : *in_store) {
        owner_of[b.cidr.to_string()] = b.node;
        if (b.node == setup.node) mine.push_back({b.cidr, b.mod_revision});
    }
    std::vector<PassRow> rows;
    std::set<std::string> had;
    for (const auto& b : *cached) had.insert(b.cidr.to_string());
    for (const auto& b : mine) {
        if (had.count(b.cidr.to_string()) == 0) {
            rows.push_back({pool, b.cidr.to_string(), PassRow::Action::kAdopted});
        }
    }
    std::map<std::string, uint64_t> use;
    for (const auto& b : *cached) {
        bool kept = false;
        for (const auto& m : mine) kept = kept || m.cidr.to_string() == b.cidr.to_string();
        if (kept) continue;
        if (use.empty()) use = local_use(setup, pool, b.cidr.prefix);
        const auto u = use.find(b.cidr.to_string());
        const auto o = owner_of.find(b.cidr.to_string());
        rows.push_back({pool, b.cidr.to_string(), PassRow::Action::kDropped,
                        u == use.end() ? 0 : u->second, o == owner_of.end() ? "" : o->second});
    }
    if (!rows.empty()) {
        if (auto st = cluster::write_block_cache(files.block_cache(pool), mine); !st) {
            return st.error();
        }
    }
    if (auto given = give_back_for_waiters(setup, store, waiting, files, pool, mine); !given) {
        return given.error();
    } else if (*given) {
        rows.push_back(std::move(**given));
    }
    return rows;
}

// What a dead invocation or helper left in the pool's state on this node is healed (the engine's
// sweep, as shmipamctl repair does): above all slots a helper killed after giving a block back
// held in a block the node no longer lists, which no ADD would scan again.
Expected<std::optional<PassRow>> heal_pool_state(const ClusterSetup& setup,
                                                 const std::string& pool) {
    auto store = open_network(setup.run_dir, "pool/" + pool, shm::Access::kReadWrite);
    if (!store) return std::optional<PassRow>{};  // no state of the pool on this node
    (*store)->act_as_invocation();
    auto swept = engine::sweep(**store);
    if (!swept) return swept.error();
    if (swept->slots_healed == 0 && swept->entries_healed == 0) return std::optional<PassRow>{};
    PassRow row{pool,
                std::to_string(swept->slots_healed) + " slots, " +
                    std::to_string(swept->entries_healed) + " attachments",
                PassRow::Action::kHealed};
    return std::optional<PassRow>{std::move(row)};
}

// The fixed claims of `pool` this node's sandboxes still use while the store gives them to another
// node (a pod started there took them over): those sandboxes must not use them any more.
Expected<std::vector<PassRow>> moved_claims(const ClusterSetup& setup, cluster::EtcdClient& etcd,
                                            const std::string& pool) {
    std::vector<PassRow> out;
    auto store = open_network(setup.run_dir, "pool/" + pool, shm::Access::kReadOnly);
    if (!store) return out;  // no state of the pool on this node
    auto claims = cluster::FixedClaims(etcd, cluster::etcd_prefix(setup.etcd)).all(pool);
    if (!claims) return claims.error();
    engine::NetworkConfig none;
    for (const auto& local : engine::Allocator(**store, none).claims()) {
        if (local.use != engine::ClaimView::Use::kInUse) continue;
        for (const auto& c : *claims) {
            const std::string ifname = cluster::ifname_of_claim_key(c.key);
            if (!(engine::fingerprint(c.key, ifname) == local.fp) || c.node == setup.node) continue;
            PassRow row{pool, "claim " + c.key + " (" + c.address.to_string() + ")",
                        PassRow::Action::kMoved};
            row.owner = c.node;
            row.container = local.container_id;
            out.push_back(std::move(row));
        }
    }
    return out;
}

}  // namespace

Expected<ClusterLsNotes> ls_notes(const ClusterSetup& setup, StoreView& view,
                                  const std::map<std::string, int>& pools) {
    ClusterLsNotes notes;
    notes.unreadable = view.unreadable;
    cluster::Waiting waiting(*view.etcd, cluster::etcd_prefix(setup.etcd));
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
        auto moved = moved_claims(setup, *view.etcd, pool);
        if (!moved) return moved.error();
        for (const auto& m : *moved) notes.moved.push_back({pool, m.block, m.owner, m.container});
    }
    return notes;
}

namespace {

// One node pass over every pool the node caches or the store gives it blocks of.
Expected<std::vector<PassRow>> node_pass(const ClusterSetup& setup) {
    auto view = read_store(setup);
    if (!view) return view.error();
    // Which cluster answers, before the caches are rewritten from it.
    if (auto st = cluster::check_cluster_id(setup.data_dir + "/_cluster",
                                            view->etcd->last_header().cluster_id);
        !st) {
        return st.error();
    }
    const cluster::NodeFiles files{setup.data_dir + "/_cluster", setup.run_dir + "/_cluster"};
    std::set<std::string> pools = cached_pools(files.state_dir);
    for (const auto& [pool, blocks] : view->blocks) {
        for (const auto& b : blocks) {
            if (b.node == setup.node) pools.insert(pool);
        }
    }
    auto cfg = cluster::etcd_config_from_json(setup.etcd);
    if (!cfg) return cfg.error();
    cluster::BlockStore store(*view->etcd, cluster::etcd_prefix(setup.etcd));
    cluster::Waiting waiting(*view->etcd, cluster::etcd_prefix(setup.etcd));
    std::vector<PassRow> out;
    for (const auto& pool : pools) {
        auto healed = heal_pool_state(setup, pool);
        if (!healed) return healed.error();
        if (*healed) out.push_back(std::move(**healed));
        auto rows = pass_pool(setup, store, waiting, files, pool,
                              cluster::kLockWaitBudgets * cfg->budget_ms);
        if (!rows) return rows.error();
        out.insert(out.end(), rows->begin(), rows->end());
    }
    for (const auto& pool : setup.fixed_pools) {
        auto rows = moved_claims(setup, *view->etcd, pool);
        if (!rows) return rows.error();
        out.insert(out.end(), rows->begin(), rows->end());
    }
    return out;
}

// Why a block of a node missing from the list is kept, or "": a block claimed after the list was
// taken (its owner may have registered since: the list cannot speak for it), or within
// blockMinAgeS (a node's first blocks while the list is being made). claimedUnixS is the
// claiming node's clock: kClockSlackS covers the difference.
std::string kept_for_age(const cluster::Block& b, time_t list_taken_at, time_t now,
                         uint64_t min_age_s) {
    const auto claimed = time_t(b.claimed_unix_s);
    if (claimed + cluster::kClockSlackS >= list_taken_at) {
        return "claimed after the node list was taken";
    }
    if (claimed + time_t(min_age_s) > now) return "claimed within blockMinAgeS";
    return "";
}

}  // namespace

// The node pass: a node learns within one period that a block was taken from it (a gc, a store
// restored by hand) and stops serving from it, even when none of its ADDs runs a helper; it
// adopts a block the store gives it that its cache lacks. Off the allocation path: a node that
// never runs it is only slower to notice (its first ADD since boot, and each block claim,
// rewrite the cache from the store too).
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
        last_failure.clear();
        if (!o.textfile_dir.empty()) {
            std::set<std::string> pools(setup->fixed_pools.begin(), setup->fixed_pools.end());
            for (const auto& r : *rows) pools.insert(r.pool);
            for (const auto& p : cached_pools(setup->data_dir + "/_cluster")) pools.insert(p);
            const std::string text = cluster_pass_metrics(
                setup->node, *rows, {pools.begin(), pools.end()}, uint64_t(std::time(nullptr)));
            if (auto st = write_textfile(o.textfile_dir, "shmipam_cluster.prom", text); !st) {
                return failed(st.error());
            }
        }
        std::cout << (common.json ? json_text(cluster_pass_json(setup->node, *rows))
                                  : cluster_pass_text(setup->node, *rows));
        std::cout.flush();
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

// The store is read before the node list is taken, and every delete compares the revision read:
// a block claimed after the store was read is never seen, one claimed after the list was taken
// or within blockMinAgeS is kept, and one claimed again meanwhile is left. So a gc never races
// a live node, whatever the list's age.
int cmd_cluster_gc(const CommonOptions& common, const ClusterGcOptions& o) {
    auto setup = read_setup(o.config, "", common.run_dir);
    if (!setup) return cannot_read(setup.error());
    auto view = read_store(*setup);
    if (!view) return cannot_read(view.error());
    cluster::EtcdClient& etcd = *view->etcd;
    cluster::FixedClaims fixed(etcd, cluster::etcd_prefix(setup->etcd));
    auto claims = fixed.everywhere();
    if (!claims) return cannot_read(claims.error());
    const time_t list_taken_at = std::time(nullptr);
    auto live = live_nodes(o.live_nodes);
    if (!live) return cannot_read(live.error());
    if (live->empty()) {
        return cannot_read(
            "--live-nodes lists no node: that would release every block of the cluster; "
            "refusing (give the cluster's Node list)");
    }
    cluster::BlockStore store(etcd, cluster::etcd_prefix(setup->etcd));
    const auto* in_store = &view->blocks;
    // A list that names none of the nodes owning blocks is almost surely the wrong list.
    std::set<std::string> owners;
    for (const auto& [pool, blocks] : *in_store) {
        for (const auto& b : blocks) owners.insert(b.node);
    }
    for (const auto& [pool, c] : *claims) owners.insert(c.node);
    bool any_live = false;
    for (const auto& n : owners) any_live = any_live || live->count(n) != 0;
    if (!owners.empty() && !any_live && !o.force) {
        return cannot_read("none of the " + std::to_string(owners.size()) +
                           " nodes owning blocks is in --live-nodes: that would release every "
                           "block of the cluster; refusing (--force if that is meant)");
    }
    const time_t now = std::time(nullptr);
    std::vector<GcBlockRow> rows;
    for (const auto& [pool, blocks] : *in_store) {
        for (const auto& b : blocks) {
            if (live->count(b.node) != 0) continue;
            GcBlockRow r{pool, b.cidr.to_string(), b.node, false,
                         kept_for_age(b, list_taken_at, now, setup->block_min_age_s)};
            if (o.apply && r.kept.empty()) {
                // At the revision read: a block claimed again meanwhile is left alone.
                auto done = store.release(pool, b);
                if (!done) return cannot_read(done.error());
                r.released = *done;
                if (*done)
                    (void)cluster::Waiting(etcd, cluster::etcd_prefix(setup->etcd))
                        .clear_idle(pool, b.cidr);
            }
            rows.push_back(std::move(r));
        }
    }
    // Fixed claims of the nodes gone (docs/cluster.md): their addresses are free again.
    for (const auto& [pool, c] : *claims) {
        if (live->count(c.node) != 0) continue;
        GcBlockRow r{pool, "claim " + c.key + " (" + c.address.to_string() + ")", c.node, false};
        if (o.apply) {
            auto done = fixed.remove(pool, c);
            if (!done) return cannot_read(done.error());
            r.released = *done;
        }
        rows.push_back(std::move(r));
    }
    std::cout << (common.json ? json_text(cluster_gc_json(rows, o.apply))
                              : cluster_gc_text(rows, o.apply));
    size_t releasable = 0;
    for (const auto& r : rows) releasable += r.kept.empty();
    return !o.apply && releasable != 0 ? kExitViolations : kExitClean;
}

}  // namespace shmipam::tools
