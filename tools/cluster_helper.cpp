// shmipam-cluster: the cluster helper (docs/cluster.md). The plugin links no etcd client (a
// static libcurl with OpenSSL would cost every exec); on the rare path that needs the cluster
// store (no owned block has room), it execs this helper, which claims a block in etcd, records
// the node's blocks of the pool in <stateDir>/<pool>.blocks, and answers.
//
// stdin (JSON): {"etcd": {"endpoints": [...], "prefix": "/shmipam", "caFile", "certFile",
//   "keyFile", "attemptTimeoutMs", "budgetMs"}, "pool": "<name>", "cidr": "<pool CIDR>",
//   "blockPrefix": 26, "node": "<node>", "maxBlocks": 32, "stateDir": "<dir>",
//   "address": "<optional: claim the block holding it>",
//   "usable": ["<first>-<last>", ...] (optional: blocks with none of these are not claimed),
//   "seen": ["<block CIDR>", ...] (optional: the node's blocks the caller knew of),
//   "ahead": bool (optional: claiming ahead of need, started detached by an ADD),
//   "lockFd": N (optional: the pool's lock is already held on this descriptor, handed over),
//   "release": "<block CIDR>", "poolState": "<arena dir>", "minAgeS": N (instead of a claim:
//   give that block back if it is empty; tools/cluster_release.h),
//   "refresh": true (instead of a claim: only rewrite the cache from the store),
//   "fixed": "<claim key>" (instead of a block: the fixed address of that claim, taken over from
//   another node if needed, or a new one among "usable"; answers {"address", "movedFrom"}),
//   "unfix": "<claim key>" (give that claim up if it is still this node's, and, with
//   "poolState" and "ifname", if that pool state holds the claim no more: {"released": bool})}
// stdout: {"claimed": "<block CIDR>" or null, "atCap": bool, "blocks": ["<CIDR>", ...]}; exit 0.
// Errors: {"code": N, "msg": "..."}, exit 1 (the plugin passes them on).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "base/build_version.h"
#include "cluster/block_cache.h"
#include "cluster/block_store.h"
#include "cluster/cluster_identity.h"
#include "cluster/etcd_config.h"
#include "cluster/fixed_claims.h"
#include "engine/addr/fingerprint.h"
#include "engine/ops/allocator.h"
#include "pools/ip_set.h"
#include "tools/cluster_release.h"

using nlohmann::json;
using namespace shmipam;

namespace {

// Holds an exclusive lock on <stateDir>/<pool>.lock until the process exits.
Status lock_pool(const std::string& state_dir, const std::string& pool) {
    std::error_code ec;
    std::filesystem::create_directories(state_dir, ec);
    const std::string path = state_dir + "/" + pool + ".lock";
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0) {
        return make_error(Code::kIo, "cannot lock " + path + ": " + std::strerror(errno));
    }
    return Ok{};  // the descriptor stays open: the lock goes with the process
}

void touch(const std::string& path) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) ::close(fd);
    ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // an existing file's time too
}

// <stateDir>/<pool>.unavailable once this helper knows the pool's state directory: written
// when the store could not be reached, read by the helpers that waited for the lock meanwhile.
std::string unavailable_marker;

int fail(const Error& e) {
    if (e.code == Code::kUnavailable && !unavailable_marker.empty()) {
        std::ofstream(unavailable_marker) << e.msg << "\n";
    }
    std::cout << json{{"code", int(e.code)}, {"msg", e.msg}, {"details", e.details}}.dump() << "\n";
    return 1;
}

// A helper that waited for the lock while the one holding it found etcd unreachable fails at
// once with that answer: ADDs that pile up on a node when etcd has no quorum each wait at most
// for the holder's budget and not for every earlier one's as well.
std::optional<Error> found_unavailable_meanwhile(const std::string& marker,
                                                 const timespec& started) {
    struct stat st {};
    if (::stat(marker.c_str(), &st) != 0) return std::nullopt;
    if (st.st_mtim.tv_sec < started.tv_sec ||
        (st.st_mtim.tv_sec == started.tv_sec && st.st_mtim.tv_nsec < started.tv_nsec) ||
        st.st_mtim.tv_sec > std::time(nullptr) + 5) {  // ahead of a clock stepped back: stale
        return std::nullopt;
    }
    std::ifstream f(marker);
    std::string why;
    std::getline(f, why);
    return make_error(Code::kUnavailable,
                      why + " (found by another helper of this node while this one waited)");
}

// Whether this node holds the claim (key, ifname) no more: its pool state read now, after the
// etcd claim was read (FixedClaims::give_up). A state that cannot be read keeps the etcd claim:
// an address left claimed is an operator's cleanup, one given twice is an outage.
bool unheld_here(const std::string& pool_state, const std::string& key, const std::string& ifname) {
    if (pool_state.empty()) return true;  // a plugin that checked before asking
    auto store = engine::NetworkStore::open_existing(pool_state, shm::Access::kReadOnly);
    if (!store) return false;
    engine::NetworkConfig cfg;
    const engine::Fingerprint fp = engine::fingerprint(key, ifname);
    for (const auto& c : engine::Allocator(**store, cfg).claims()) {
        if (c.fp == fp) return false;
    }
    return true;
}

int run(const json& in) {
    auto cfg = cluster::etcd_config_from_json(in.value("etcd", json::object()));
    if (!cfg) return fail(cfg.error());
    const std::string pool = in.value("pool", "");
    const std::string node = in.value("node", "");
    const std::string state_dir = in.value("stateDir", "");
    if (pool.empty() || node.empty() || state_dir.empty()) {
        return fail(
            make_error(Code::kInvalidConfig, "the cluster helper needs pool, node, stateDir"));
    }
    const bool releasing = in.contains("release");
    const bool fixed = in.contains("fixed") || in.contains("unfix");
    auto pool_cidr = engine::Cidr::parse(in.value("cidr", releasing || fixed ? "0.0.0.0/0" : ""));
    const int block_prefix = in.value("blockPrefix", releasing || fixed ? 32 : 0);
    auto release = engine::Cidr::parse(in.value("release", ""));
    if (!pool_cidr || block_prefix <= 0 || (releasing && !release)) {
        return fail(make_error(Code::kInvalidConfig,
                               "the cluster helper needs cidr and blockPrefix to claim, and a "
                               "block CIDR to release"));
    }
    pools::IpSet usable(pool_cidr->address.family);
    if (auto u = in.find("usable"); u != in.end() && u->is_array()) {
        for (const auto& r : *u) {
            if (!r.is_string()) return fail(make_error(Code::kDecode, "usable: strings"));
            if (auto st = usable.add_text(r.get<std::string>()); !st) return fail(st.error());
        }
    }
    // One helper at a time per node and pool: two that each read, claim and write the cache
    // could otherwise write it in the wrong order and lose a block.
    // An ADD claiming ahead hands over the lock it took (so no second helper starts meanwhile).
    const int lock_fd = in.value("lockFd", -1);
    timespec started{};
    ::clock_gettime(CLOCK_REALTIME, &started);
    if (lock_fd < 0 || ::fcntl(lock_fd, F_GETFD) < 0) {
        if (auto st = lock_pool(state_dir, pool); !st) return fail(st.error());
    }
    const std::string marker = state_dir + "/" + pool + ".unavailable";
    if (auto e = found_unavailable_meanwhile(marker, started)) return fail(*e);
    unavailable_marker = marker;
    cluster::EtcdClient etcd(*cfg);
    cluster::BlockStore store(etcd, cluster::etcd_prefix(in.value("etcd", json::object())));
    // Which cluster answers, before anything is claimed in it.
    auto owned = store.blocks(pool);
    if (!owned) return fail(owned.error());
    if (auto st = cluster::check_cluster_id(state_dir, etcd.last_header().cluster_id); !st) {
        return fail(st.error());
    }
    if (fixed) {
        cluster::FixedClaims claims(etcd, cluster::etcd_prefix(in.value("etcd", json::object())));
        if (in.contains("unfix")) {
            const std::string key = in.value("unfix", "");
            auto done = claims.give_up(pool, key, node, [&] {
                return unheld_here(in.value("poolState", ""), key, in.value("ifname", ""));
            });
            if (!done) return fail(done.error());
            std::cout << json{{"released", *done}}.dump() << "\n";
            return 0;
        }
        // The first usable address no claim holds.
        const auto pick =
            [&](const std::set<std::string>& taken) -> std::optional<engine::IpAddress> {
            for (const auto& i : usable.intervals()) {
                for (engine::u128 v = i.first;; ++v) {
                    const engine::IpAddress a{v, usable.family()};
                    if (taken.count(a.to_string()) == 0) return a;
                    if (v == i.last) break;
                }
            }
            return std::nullopt;
        };
        std::string moved_from;
        auto got = claims.take(pool, in.value("fixed", ""), node, pick, &moved_from);
        if (!got) return fail(got.error());
        std::cout << json{{"address", got->address.to_string()}, {"movedFrom", moved_from}}.dump()
                  << "\n";
        return 0;
    }
    if (releasing) {
        cluster_helper::ReleaseRequest r{
            pool, node, state_dir, *release, in.value("poolState", ""), in.value("minAgeS", 300u)};
        auto out = cluster_helper::release_block(r, store, *owned);
        if (!out) return fail(out.error());
        std::cout << out->dump() << "\n";
        return 0;
    }
    if (auto st = store.check_geometry(pool, *pool_cidr, block_prefix); !st) {
        return fail(st.error());
    }
    // Blocks the store gives this node that its cache does not list (a helper that died after
    // claiming): recorded first, and they may be all the caller needs.
    auto cache = cluster::read_block_cache(cluster::block_cache_path(state_dir, pool));
    if (!cache) return fail(cache.error());
    json out{{"claimed", nullptr}, {"atCap", false}};
    // A block of this node the caller did not know of (another ADD's helper claimed it while
    // this one waited for the lock): that one first, no new claim.
    std::set<std::string> seen;
    if (auto s = in.find("seen"); s != in.end() && s->is_array()) {
        for (const auto& c : *s) {
            if (c.is_string()) seen.insert(c.get<std::string>());
        }
    }
    std::optional<std::string> unseen;
    for (const cluster::Block& b : *owned) {
        if (b.node == node && seen.count(b.cidr.to_string()) == 0 &&
            (usable.empty() || !usable.intersect(b.cidr).empty())) {
            unseen = b.cidr.to_string();
        }
    }
    if (in.value("refresh", false)) {
        // Only the cache brought in line with the store (below): a node's first ADD of the
        // pool since it booted.
    } else if (unseen && !in.contains("address")) {
        out["claimed"] = *unseen;
    } else if (in.contains("address")) {
        auto a = engine::IpAddress::parse(in.value("address", ""));
        if (!a) return fail(make_error(Code::kRequestedAddressInvalid, "not an address"));
        auto b = store.claim_holding(pool, *pool_cidr, block_prefix, *a, node);
        if (!b) return fail(b.error());
        out["claimed"] = b->cidr.to_string();
    } else {
        bool at_cap = false;
        const auto worth = [&](const engine::Cidr& c) {
            return usable.empty() || !usable.intersect(c).empty();
        };
        auto b = store.claim_next(pool, *pool_cidr, block_prefix, node,
                                  in.value("maxBlocks", size_t{32}), &at_cap, worth);
        if (!b) return fail(b.error());
        if (*b) out["claimed"] = (*b)->cidr.to_string();
        out["atCap"] = at_cap;
        // Nothing to claim: ADDs stop starting helpers ahead of need for a while (claim_ahead).
        if (!*b) touch(state_dir + "/" + pool + ".ahead-none");
    }
    // The node's blocks of the pool, as the store says now (if it cannot say, what the cache
    // had plus what was just claimed: a claimed block is never left out of the cache).
    owned = store.blocks(pool);
    if (!owned) {
        if (!out["claimed"].is_null()) {
            std::vector<cluster::OwnedBlock> kept = *cache;
            kept.push_back({*engine::Cidr::parse(out["claimed"].get<std::string>()), 0});
            (void)cluster::write_block_cache(cluster::block_cache_path(state_dir, pool), kept);
        }
        return fail(owned.error());
    }
    std::vector<cluster::OwnedBlock> mine;
    json names = json::array();
    for (const cluster::Block& b : *owned) {
        if (b.node != node) continue;
        mine.push_back({b.cidr, b.mod_revision});
        names.push_back(b.cidr.to_string());
    }
    if (auto st = cluster::write_block_cache(cluster::block_cache_path(state_dir, pool), mine);
        !st) {
        return fail(st.error());
    }
    out["blocks"] = names;
    std::cout << out.dump() << "\n";
    return 0;
}

}  // namespace

SHMIPAM_STAMP_BUILD_VERSION();  // read by shmipamctl install

int main() {
    const std::string text{std::istreambuf_iterator<char>(std::cin),
                           std::istreambuf_iterator<char>()};
    const json in = json::parse(text, nullptr, false);
    if (in.is_discarded() || !in.is_object()) {
        return fail(make_error(Code::kDecode, "the cluster helper reads a JSON object on stdin"));
    }
    return run(in);
}
