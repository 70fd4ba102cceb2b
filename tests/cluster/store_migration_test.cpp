// The store's migration from the v1 layout (docs/cluster.md, "Migrating the store"): simulated
// nodes against the real etcd, the real plugin, helper and shmipamctl.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "cluster/block_store.h"
#include "cluster/key_schema.h"
#include "tests/cluster/simulated_nodes.h"

namespace shmipam::testing {
namespace {

class StoreMigration : public SimulatedNodes {
  protected:
    // The store as the v1 release left it: every pool key under /v1/pools/ with v1's values (a
    // claim without its policy, no meta for a pool of fixed addresses), and no registry, CIDR
    // records or schema record. v1's values are v2's less the fields v2 added, so the nodes'
    // v2 store, moved so, is what a v1 cluster with the same history holds.
    void rewrite_as_v1() const {
        cluster::EtcdClient client(client_config());
        auto kvs = client.get_prefix("/shmipam/v2/pools/");
        ASSERT_TRUE(kvs);
        for (const auto& kv : *kvs) {
            std::string key = kv.key;
            key.replace(0, std::string("/shmipam/v2").size(), "/shmipam/v1");
            json v = json::parse(kv.value);
            if (key.find("/claims/") != std::string::npos) {
                v.erase("keepIdle");
                v.erase("idleSinceUnixS");
            }
            if (key.size() > 5 && key.compare(key.size() - 5, 5, "/meta") == 0 &&
                v["blockPrefix"] == 0) {
                continue;  // v1 wrote no meta for a pool of fixed addresses
            }
            ASSERT_TRUE(client.put(key, v.dump()));
        }
        ASSERT_TRUE(client.txn({}, {{"/shmipam/v2/", std::nullopt, true}}));
    }
    std::map<std::string, std::string> owners(const std::string& version) const {
        cluster::EtcdClient client(client_config());
        auto kvs = client.get_prefix("/shmipam/" + version + "/pools/shared/blocks/");
        EXPECT_TRUE(kvs);
        std::map<std::string, std::string> out;
        for (const auto& kv : kvs ? *kvs : std::vector<cluster::KeyValue>{}) {
            out[kv.key.substr(kv.key.rfind('/') + 1)] = json::parse(kv.value)["node"];
        }
        return out;
    }
};

// A store a v1 release wrote is refused by this release's helper (code 7, naming the verb)
// rather than read as empty, which would give every block of the pool again; `cluster migrate`
// carries it over (a dry run first), after which the nodes claim on as before, each keeping its
// blocks, and a fixed claim keeps its address.
TEST_F(StoreMigration, AStoreOfTheV1LayoutIsRefusedUntilMigratedThenEveryBlockKeepsItsOwner) {
    write_file(dir.sub("pools") + "/sts.yaml",
               "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
               "metadata: {name: sts}\nspec: {subnet: 10.78.0.0/24, ips: "
               "[\"10.78.0.2-10.78.0.20\"]}\n");
    add_pods(0, 5);
    add_pods(1, 20);
    const auto before = owners("v2");
    ASSERT_EQ(before.size(), 3u);
    rewrite_as_v1();
    cluster::EtcdClient client(client_config());
    // A fixed claim of the v1 layout (no policy, no meta of its pool).
    ASSERT_TRUE(client.put("/shmipam/v1/pools/sts/claims/sts:shop/db-0/eth0",
                           R"({"address": "10.78.0.5", "node": "node-1", "nonce": "n1"})"));
    ASSERT_TRUE(client.put("/shmipam/v1/pools/sts/addresses/10.78.0.5",
                           R"({"claim": "sts:shop/db-0/eth0"})"));

    // node-0 fills its block, and the ADD that needs the store is refused.
    json c = config(0);
    c["ipam"]["claimAheadPercent"] = 0;
    ProcessResult refused = run_plugin(cni_env("ADD", "m5"), c.dump());
    for (int p = 6; p < 20 && refused.exit_code == 0; ++p) {
        refused = run_plugin(cni_env("ADD", "m" + std::to_string(p)), c.dump());
    }
    ASSERT_EQ(refused.exit_code, 1) << refused.out;
    EXPECT_EQ(refused.json()["code"], 7) << refused.out;
    EXPECT_NE(refused.out.find("cluster migrate"), std::string::npos) << refused.out;
    EXPECT_TRUE(owners("v2").empty()) << "nothing claimed in a layout nobody else reads";

    auto dry = run_ctl({"cluster", "migrate", "--config", config_file(0)});
    EXPECT_EQ(dry.exit_code, 1) << dry.out << dry.err;
    EXPECT_NE(dry.out.find("would write 2 pool registrations, 3 blocks, 1 fixed claims"),
              std::string::npos)
        << dry.out;
    EXPECT_TRUE(owners("v2").empty()) << "a dry run writes nothing";

    auto applied = run_ctl({"cluster", "migrate", "--config", config_file(0), "--apply"});
    ASSERT_EQ(applied.exit_code, 0) << applied.out << applied.err;
    EXPECT_EQ(owners("v2"), before);
    auto claim = client.get(cluster::keys::claim("/shmipam", "sts", "sts:shop/db-0/eth0"));
    ASSERT_TRUE(claim && *claim);
    EXPECT_EQ(json::parse((*claim)->value)["keepIdle"], 0) << "no policy recorded: never";
    auto fenced = client.get("/shmipam/v1/pools/shared/meta");
    ASSERT_TRUE(fenced && *fenced);
    EXPECT_NE((*fenced)->value.find("migrated"), std::string::npos) << (*fenced)->value;

    // The nodes claim on; no address twice; the operator's view is clean.
    std::set<std::string> given;
    for (int p = 20; p < 40; ++p) {
        auto r = run_plugin(cni_env("ADD", "m" + std::to_string(p)), c.dump());
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
        given.insert(r.json()["ips"][0]["address"].get<std::string>());
    }
    EXPECT_EQ(given.size(), 20u);
    for (const auto& [block, node] : before) EXPECT_EQ(owners("v2")[block], node) << block;
    auto ls = run_ctl({"cluster", "ls", "--config", config_file(0)});
    EXPECT_EQ(ls.exit_code, 0) << ls.out << ls.err;
    auto again = run_ctl({"cluster", "migrate", "--config", config_file(0)});
    EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
    EXPECT_NE(again.out.find("nothing to do"), std::string::npos) << again.out;
}

// v1 let two pools' CIDRs overlap, which v2 refuses: the migration names them and writes
// nothing (exit 2), so the operator drops one first.
TEST_F(StoreMigration, AV1StoreWithOverlappingPoolsIsRefusedNamingThemAndNothingIsWritten) {
    cluster::EtcdClient client(client_config());
    ASSERT_TRUE(client.put("/shmipam/v1/pools/wide/meta",
                           R"({"cidr": "10.80.0.0/16", "blockPrefix": 26})"));
    ASSERT_TRUE(client.put("/shmipam/v1/pools/narrow/meta",
                           R"({"cidr": "10.80.1.0/24", "blockPrefix": 28})"));
    auto r = run_ctl({"cluster", "migrate", "--config", config_file(0), "--apply"});
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("overlap"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("wide"), std::string::npos) << r.err;
    auto v2 = client.any_under("/shmipam/v2/");
    ASSERT_TRUE(v2);
    EXPECT_FALSE(*v2) << "nothing written";
    auto bad = run_ctl({"cluster", "migrate", "--config", config_file(0), "--pool-cidr", "x"});
    EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
}

}  // namespace
}  // namespace shmipam::testing
