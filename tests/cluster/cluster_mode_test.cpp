// Cluster mode end to end (docs/cluster.md): simulated nodes (each its own run and data
// directories and node name) exec the real plugin against one pool shared through a real
// 3-member etcd. Concurrent ADDs on every node claim blocks through the cluster helper; no
// address is held twice cluster-wide; with etcd gone, ADDs inside owned blocks still succeed and
// one that needs a new block fails with "etcd unavailable".
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "tests/support/etcd_cluster.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;

class ClusterMode : public ::testing::Test {
  protected:
    void SetUp() override {
        SHMIPAM_REQUIRE_ETCD();
        etcd = std::make_unique<EtcdCluster>(3);
        ASSERT_TRUE(etcd->ready()) << etcd->why_not_ready();
        ::mkdir(dir.sub("pools").c_str(), 0755);
        write_file(dir.sub("pools") + "/pool.yaml",
                   "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
                   "metadata: {name: shared}\nspec: {subnet: 10.77.0.0/24, ips: "
                   "[\"10.77.0.0-10.77.0.255\"], default: true}\n");
    }
    json config(int node) const {
        const std::string n = "node-" + std::to_string(node);
        return {{"cniVersion", "1.1.0"},
                {"name", "net"},
                {"type", "bridge"},
                {"ipam",
                 {{"type", "shmipam"},
                  {"runDir", dir.sub(n + "/run")},
                  {"dataDir", dir.sub(n + "/data")},
                  {"poolsDir", dir.sub("pools")},
                  {"nodeName", n},
                  {"reuseDelay", 0},
                  {"blockSize", 28},
                  {"clusterHelper", SHMIPAM_CLUSTER_HELPER_PATH},
                  {"etcd", {{"endpoints", etcd->client_urls()}, {"budgetMs", 3000}}}}}};
    }
    TempDir dir;
    std::unique_ptr<EtcdCluster> etcd;
};

TEST_F(ClusterMode, ConcurrentAddsOnThreeNodesNeverShareAnAddress) {
    constexpr int kNodes = 3, kPods = 20;
    std::vector<std::unique_ptr<Child>> children;
    std::vector<int> node_of;
    for (int n = 0; n < kNodes; ++n) {
        const std::string cfg = config(n).dump();
        for (int p = 0; p < kPods; ++p) {
            children.push_back(std::make_unique<Child>(
                std::vector<std::string>{SHMIPAM_PLUGIN_PATH},
                cni_env("ADD", "n" + std::to_string(n) + "-p" + std::to_string(p)), cfg));
            node_of.push_back(n);
        }
    }
    std::set<std::string> addresses;
    std::map<int, std::set<std::string>> blocks_used;  // node -> /28 blocks its pods got
    for (size_t i = 0; i < children.size(); ++i) {
        auto r = children[i]->wait();
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
        const std::string a = r.json()["ips"][0]["address"];
        EXPECT_TRUE(addresses.insert(a).second) << a << " given twice";
        const auto ip = a.substr(0, a.find('/'));
        const int last = std::stoi(ip.substr(ip.rfind('.') + 1));
        blocks_used[node_of[i]].insert("10.77.0." + std::to_string(last / 16 * 16) + "/28");
    }
    // No block serves two nodes.
    std::map<std::string, int> owner;
    for (const auto& [n, blocks] : blocks_used) {
        for (const auto& b : blocks) {
            auto [it, fresh] = owner.emplace(b, n);
            EXPECT_TRUE(fresh) << b << " used by nodes " << it->second << " and " << n;
        }
    }
    for (int n = 0; n < kNodes; ++n) {
        auto v = run_ctl(
            {"--run-dir", dir.sub("node-" + std::to_string(n) + "/run"), "verify", "pool/shared"});
        EXPECT_EQ(v.exit_code, 0) << v.out;
    }
}

TEST_F(ClusterMode, WithEtcdGoneAddsInsideOwnedBlocksSucceedAndANewBlockFailsClearly) {
    json c = config(0);
    c["ipam"]["claimAheadPercent"] = 0;  // steady state only: no helper ahead of need
    const std::string cfg = c.dump();
    auto first = run_plugin(cni_env("ADD", "a0"), cfg);
    ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
    for (size_t i = 0; i < etcd->size(); ++i) etcd->kill(i);
    // The rest of the node's /28 (16 addresses) needs no etcd call.
    int added = 1;
    for (int p = 1; p < 40; ++p) {
        auto r = run_plugin(cni_env("ADD", "a" + std::to_string(p)), cfg);
        if (r.exit_code != 0) {
            EXPECT_EQ(r.json()["code"], 50) << r.out;
            EXPECT_NE(r.json()["msg"].get<std::string>().find("etcd unavailable"),
                      std::string::npos)
                << r.out;
            break;
        }
        ++added;
    }
    EXPECT_EQ(added, 16) << "the node's one block, whole: steady state makes no etcd call";
}

size_t cached_blocks(const std::string& cache_path) {
    const std::string text = read_file(cache_path);
    return size_t(std::count(text.begin(), text.end(), '\n'));
}

// Claiming ahead of need: once the node's one /28 has 4 free addresses left (75% full), an ADD
// starts the helper detached for the next block; the ADDs after it, with etcd gone, are served
// from that block without waiting on the store.
TEST_F(ClusterMode, ANodeClaimsItsNextBlockAheadOfNeedSoPodStartsNeverWaitOnEtcd) {
    json c = config(0);
    c["ipam"]["claimAheadPercent"] = 75;
    const std::string cfg = c.dump();
    const std::string cache = dir.sub("node-0/data/_cluster") + "/shared.blocks";
    int added = 0;
    for (; added < 8; ++added) {
        auto r = run_plugin(cni_env("ADD", "a" + std::to_string(added)), cfg);
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    }
    ::usleep(500 * 1000);
    EXPECT_EQ(cached_blocks(cache), 1u) << "8 of 16 taken: not yet" << read_file(cache);
    for (; added < 13; ++added) {
        auto r = run_plugin(cni_env("ADD", "a" + std::to_string(added)), cfg);
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    }
    for (int i = 0; i < 100 && cached_blocks(cache) < 2; ++i) ::usleep(50 * 1000);
    ASSERT_EQ(cached_blocks(cache), 2u) << "the next block, claimed ahead: " << read_file(cache);
    for (size_t i = 0; i < etcd->size(); ++i) etcd->kill(i);
    for (; added < 32; ++added) {
        const auto start = std::chrono::steady_clock::now();
        auto r = run_plugin(cni_env("ADD", "a" + std::to_string(added)), cfg);
        ASSERT_EQ(r.exit_code, 0) << added << ": " << r.out << r.err;
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - start)
                            .count();
        EXPECT_LT(ms, 1000) << "ADD " << added << " waited on etcd";
    }
    // Both blocks are full now; the next ADD needs the store, which is gone.
    auto r = run_plugin(cni_env("ADD", "a32"), cfg);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.json()["code"], 50) << r.out;
    auto v = run_ctl({"--run-dir", dir.sub("node-0/run"), "verify", "pool/shared"});
    EXPECT_EQ(v.exit_code, 0) << v.out;
}

// Found by review: the helper was told only the pool's subnet, so with `ips` narrower than the
// subnet it claimed blocks with nothing allocatable in them, and ADDs failed. It is now told the
// allocatable addresses and claims only blocks holding some.
TEST_F(ClusterMode, OnlyBlocksWithAllocatableAddressesAreClaimed) {
    write_file(dir.sub("pools") + "/pool.yaml",
               "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
               "metadata: {name: shared}\nspec: {subnet: 10.77.0.0/24, ips: "
               "[\"10.77.0.200-10.77.0.220\"], default: true}\n");
    const std::string cfg = config(0).dump();
    for (int p = 0; p < 21; ++p) {
        auto r = run_plugin(cni_env("ADD", "a" + std::to_string(p)), cfg);
        ASSERT_EQ(r.exit_code, 0) << p << ": " << r.out << r.err;
    }
    auto full = run_plugin(cni_env("ADD", "a21"), cfg);
    EXPECT_EQ(full.exit_code, 1);
    EXPECT_EQ(full.json()["code"], 100) << full.out;
    const std::string cache = read_file(dir.sub("node-0/data/_cluster") + "/shared.blocks");
    EXPECT_EQ(cache.find("10.77.0.192/28") != std::string::npos, true) << cache;
    EXPECT_EQ(cache.find("10.77.0.208/28") != std::string::npos, true) << cache;
    EXPECT_EQ(std::count(cache.begin(), cache.end(), '\n'), 2) << cache;
}

}  // namespace
}  // namespace shmipam::testing
