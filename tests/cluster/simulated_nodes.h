// Simulated nodes against a real etcd cluster, for the cluster tests (docs/cluster.md): each
// node its own run and data directories and node name, exec'ing the real plugin and cluster
// helper, one pool "shared" (10.77.0.0/24 in /28 blocks unless a test writes another).
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cluster/block_store.h"
#include "cluster/key_schema.h"
#include "engine/addr/ip_address.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"
#include "tests/support/three_etcd_members.h"
#include "tests/support/wait_for.h"

namespace shmipam::testing {

using nlohmann::json;

class SimulatedNodes : public ThreeEtcdMembers {
  protected:
    void SetUp() override {
        ThreeEtcdMembers::SetUp();
        if (HasFatalFailure() || IsSkipped()) return;
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
    // A node's config as a file, for shmipamctl cluster --config.
    std::string config_file(int node) const {
        const std::string path = dir.sub("node-" + std::to_string(node) + ".conf");
        json c = config(node);
        c["ipam"]["claimAheadPercent"] = 0;
        write_file(path, c.dump());
        return path;
    }
    void add_pods(int node, int pods) {
        json c = config(node);
        c["ipam"]["claimAheadPercent"] = 0;
        for (int p = 0; p < pods; ++p) {
            auto r = run_plugin(
                cni_env("ADD", "n" + std::to_string(node) + "-p" + std::to_string(p)), c.dump());
            ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
        }
    }
    std::vector<cluster::Block> store_blocks() const {
        cluster::EtcdClient client(client_config());
        auto b = cluster::BlockStore(client, "/shmipam").blocks("shared");
        EXPECT_TRUE(b) << b.error().msg;
        return b ? *b : std::vector<cluster::Block>{};
    }
    // Moves every block's claim time `seconds` back, as if claimed that long ago (a gc keeps
    // blocks claimed after its node list was taken or within blockMinAgeS).
    void age_blocks(uint64_t seconds) const {
        cluster::EtcdClient client(client_config());
        for (const auto& b : store_blocks()) {
            const json v{
                {"node", b.node}, {"nonce", b.nonce}, {"claimedUnixS", b.claimed_unix_s - seconds}};
            ASSERT_TRUE(client.put(cluster::keys::block("/shmipam", "shared", b.cidr), v.dump()));
        }
    }
    TempDir dir;
};

// The lines of a node's block cache: its blocks.
inline size_t cached_blocks(const std::string& cache_path) {
    const std::string text = read_file(cache_path);
    return size_t(std::count(text.begin(), text.end(), '\n'));
}

// The /28 (or `prefix`) block an address "a.b.c.d/len" lies in, as a CIDR.
inline std::string block_of(const std::string& address, int prefix = 28) {
    auto a = engine::IpAddress::parse(address.substr(0, address.find('/')));
    return a ? engine::Cidr{engine::Cidr{*a, prefix}.network(), prefix}.to_string() : "";
}

inline size_t blocks_of(const std::vector<cluster::Block>& blocks, const std::string& node) {
    size_t n = 0;
    for (const auto& b : blocks) n += b.node == node;
    return n;
}

// Polls the store until `node` owns `want` blocks (a detached helper may first wait for the
// pool lock, then make several store calls: kStateDeadline bounds only a hang).
inline bool wait_for_blocks(const std::function<std::vector<cluster::Block>()>& read,
                            const std::string& node, size_t want) {
    return wait_until([&] { return blocks_of(read(), node) == want; });
}

}  // namespace shmipam::testing
