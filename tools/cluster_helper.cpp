// shmipam-cluster: the cluster helper (docs/cluster.md). The plugin links no etcd client (a
// static libcurl with OpenSSL would cost every exec); on the rare path that needs the cluster
// store (no owned block has room), it execs this helper, which claims a block in etcd, records
// the node's blocks of the pool in <stateDir>/<pool>.blocks, and answers.
//
// stdin (JSON): {"etcd": {"endpoints": [...], "prefix": "/shmipam", "caFile", "certFile",
//   "keyFile", "attemptTimeoutMs", "budgetMs"}, "pool": "<name>", "cidr": "<pool CIDR>",
//   "blockPrefix": 26, "node": "<node>", "maxBlocks": 32, "stateDir": "<dir>",
//   "address": "<optional: claim the block holding it>"}
// stdout: {"claimed": "<block CIDR>" or null, "atCap": bool, "blocks": ["<CIDR>", ...]}; exit 0.
// Errors: {"code": N, "msg": "..."}, exit 1 (the plugin passes them on).
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cluster/block_cache.h"
#include "cluster/block_store.h"
#include "cluster/cluster_identity.h"

using nlohmann::json;
using namespace shmipam;

namespace {

int fail(const Error& e) {
    std::cout << json{{"code", int(e.code)}, {"msg", e.msg}, {"details", e.details}}.dump() << "\n";
    return 1;
}

Expected<cluster::EtcdConfig> etcd_config(const json& j) {
    cluster::EtcdConfig c;
    if (!j.is_object() || !j.contains("endpoints") || !j["endpoints"].is_array() ||
        j["endpoints"].empty()) {
        return make_error(Code::kInvalidConfig, "ipam.etcd.endpoints must be a non-empty list");
    }
    for (const auto& e : j["endpoints"]) {
        if (!e.is_string()) return make_error(Code::kInvalidConfig, "an etcd endpoint is a URL");
        c.endpoints.push_back(e.get<std::string>());
    }
    c.ca_file = j.value("caFile", "");
    c.cert_file = j.value("certFile", "");
    c.key_file = j.value("keyFile", "");
    c.attempt_timeout_ms = j.value("attemptTimeoutMs", uint64_t{1000});
    c.budget_ms = j.value("budgetMs", uint64_t{5000});
    return c;
}

int run(const json& in) {
    auto cfg = etcd_config(in.value("etcd", json::object()));
    if (!cfg) return fail(cfg.error());
    const std::string pool = in.value("pool", "");
    const std::string node = in.value("node", "");
    const std::string state_dir = in.value("stateDir", "");
    auto pool_cidr = engine::Cidr::parse(in.value("cidr", ""));
    const int block_prefix = in.value("blockPrefix", 0);
    if (pool.empty() || node.empty() || state_dir.empty() || !pool_cidr || block_prefix <= 0) {
        return fail(make_error(Code::kInvalidConfig,
                               "the cluster helper needs pool, cidr, blockPrefix, node, stateDir"));
    }
    cluster::EtcdClient etcd(*cfg);
    cluster::BlockStore store(etcd, in.value("etcd", json::object()).value("prefix", "/shmipam"));
    // Which cluster answers, before anything is claimed in it.
    auto owned = store.blocks(pool);
    if (!owned) return fail(owned.error());
    if (auto st = cluster::check_cluster_id(state_dir, etcd.last_header().cluster_id); !st) {
        return fail(st.error());
    }
    json out{{"claimed", nullptr}, {"atCap", false}};
    if (in.contains("address")) {
        auto a = engine::IpAddress::parse(in.value("address", ""));
        if (!a) return fail(make_error(Code::kRequestedAddressInvalid, "not an address"));
        auto b = store.claim_holding(pool, *pool_cidr, block_prefix, *a, node);
        if (!b) return fail(b.error());
        out["claimed"] = b->cidr.to_string();
    } else {
        bool at_cap = false;
        auto b = store.claim_next(pool, *pool_cidr, block_prefix, node,
                                  in.value("maxBlocks", size_t{32}), &at_cap);
        if (!b) return fail(b.error());
        if (*b) out["claimed"] = (*b)->cidr.to_string();
        out["atCap"] = at_cap;
    }
    // The node's blocks of the pool, as the store says now.
    owned = store.blocks(pool);
    if (!owned) return fail(owned.error());
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

int main() {
    const std::string text{std::istreambuf_iterator<char>(std::cin),
                           std::istreambuf_iterator<char>()};
    const json in = json::parse(text, nullptr, false);
    if (in.is_discarded() || !in.is_object()) {
        return fail(make_error(Code::kDecode, "the cluster helper reads a JSON object on stdin"));
    }
    return run(in);
}
