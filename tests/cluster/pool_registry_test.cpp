// Pools keyed by their addresses (docs/cluster.md, "The store's schema" and "Changing a pool's
// CIDR or block size"): simulated nodes against the real etcd, the real plugin, helper and
// shmipamctl.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "cluster/key_schema.h"
#include "tests/cluster/simulated_nodes.h"

namespace shmipam::testing {
namespace {

class PoolRegistry : public SimulatedNodes {
  protected:
    // Node `node`'s config with its own pools directory holding one pool file.
    json node_with_pool(int node, const std::string& name, const std::string& subnet,
                        const std::string& ips = "10.77.0.0-10.77.0.255") const {
        const std::string pools = dir.sub("pools-" + std::to_string(node));
        ::mkdir(pools.c_str(), 0755);
        write_file(pools + "/pool.yaml",
                   "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
                   "metadata: {name: " +
                       name + "}\nspec: {subnet: " + subnet + ", ips: [\"" + ips +
                       "\"], default: true}\n");
        json c = config(node);
        c["ipam"]["poolsDir"] = pools;
        c["ipam"]["claimAheadPercent"] = 0;
        return c;
    }
    ProcessResult add(int node, const json& c, const std::string& cid) const {
        return run_plugin(cni_env("ADD", cid), c.dump());
    }
    size_t blocks_under(const std::string& pool) const {
        cluster::EtcdClient client(client_config());
        auto kvs = client.get_prefix(cluster::keys::blocks("/shmipam", pool));
        EXPECT_TRUE(kvs);
        return kvs ? kvs->size() : 0;
    }
};

// The failure guarded: the same CIDR under another name (a pool re-created so, or named
// otherwise on another node) giving each block two owners. A pool's CIDR is registered to one
// name, and another name for it is refused (7).
TEST_F(PoolRegistry, APoolOfTheSameCidrUnderAnotherNameIsRefusedNotGivenTwoOwners) {
    auto first = add(0, node_with_pool(0, "shared", "10.77.0.0/24"), "a1");
    ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
    auto other = add(1, node_with_pool(1, "renamed", "10.77.0.0/24"), "b1");
    EXPECT_EQ(other.exit_code, 1) << other.out;
    EXPECT_EQ(other.json()["code"], 7) << other.out;
    EXPECT_NE(other.out.find("which pool shared holds"), std::string::npos) << other.out;
    EXPECT_EQ(blocks_under("renamed"), 0u) << "no block of the same addresses under another name";
    // Overlapping CIDRs too, either way round.
    auto wider = add(2, node_with_pool(2, "wider", "10.77.0.0/23", "10.77.0.0-10.77.1.255"), "c1");
    EXPECT_EQ(wider.json()["code"], 7) << wider.out;
    EXPECT_NE(wider.out.find("overlaps"), std::string::npos) << wider.out;
    EXPECT_EQ(blocks_under("wider"), 0u);
}

// The failure guarded: with the pool's meta deleted by hand, a node asking for another block
// size claiming blocks of that size over the ones there. The registration is refused while
// blocks of another size are in the store, and a claim skips any block overlapping a stored one.
TEST_F(PoolRegistry, AMetaDeletedByHandDoesNotLetBlocksOfAnotherSizeOverlap) {
    auto first = add(0, node_with_pool(0, "shared", "10.77.0.0/24"), "a1");
    ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
    cluster::EtcdClient client(client_config());
    ASSERT_TRUE(client.txn({}, {{cluster::keys::meta("/shmipam", "shared"), std::nullopt},
                                {cluster::keys::cidrs("/shmipam"), std::nullopt, true}}));
    json c = node_with_pool(1, "shared", "10.77.0.0/24");
    c["ipam"]["blockSize"] = 26;
    auto r = add(1, c, "b1");
    EXPECT_EQ(r.json()["code"], 7) << r.out;
    EXPECT_NE(r.out.find("no registration"), std::string::npos) << r.out;
    EXPECT_EQ(blocks_under("shared"), 1u);
}

// Changing a pool's block size (or CIDR) had no way through: every claim on every node failed
// with 7 and nothing changed it. Now: refused, saying how; the pool is removed from the node's
// pool files, the node pass gives its blocks back, `cluster drop-pool` removes it, and the pool
// comes back cut the new way.
TEST_F(PoolRegistry, APoolsBlockSizeChangesThroughDropPoolAfterTheNodesGiveItsBlocksBack) {
    json c = node_with_pool(0, "shared", "10.77.0.0/24");
    ASSERT_EQ(add(0, c, "a1").exit_code, 0);
    ASSERT_EQ(run_plugin(cni_env("DEL", "a1"), c.dump()).exit_code, 0);
    const std::string conf = dir.sub("node-0.conf");
    write_file(conf, c.dump());
    // Another node cut in /27 blocks is refused, saying how to change it.
    json bigger = node_with_pool(1, "shared", "10.77.0.0/24");
    bigger["ipam"]["blockSize"] = 27;
    auto refused = add(1, bigger, "b1");
    ASSERT_EQ(refused.exit_code, 1) << refused.out;
    EXPECT_EQ(refused.json()["code"], 7) << refused.out;
    EXPECT_NE(refused.out.find("drop-pool"), std::string::npos) << refused.out;
    // Still held: drop-pool refuses, naming the node.
    auto held = run_ctl({"cluster", "drop-pool", "--config", conf, "--pool", "shared"});
    EXPECT_EQ(held.exit_code, 1) << held.out << held.err;
    EXPECT_NE(held.out.find("node-0: 1"), std::string::npos) << held.out;
    // The pool file removed: the node's pass gives its last block back.
    ::unlink((std::string(c["ipam"]["poolsDir"]) + "/pool.yaml").c_str());
    auto pass = run_ctl({"cluster", "pass", "--config", conf});
    EXPECT_EQ(pass.exit_code, 0) << pass.out << pass.err;
    EXPECT_NE(pass.out.find("no longer configured"), std::string::npos) << pass.out;
    EXPECT_EQ(blocks_under("shared"), 0u);
    auto dry = run_ctl({"cluster", "drop-pool", "--config", conf, "--pool", "shared"});
    EXPECT_EQ(dry.exit_code, 1) << dry.out << dry.err;
    auto dropped =
        run_ctl({"cluster", "drop-pool", "--config", conf, "--pool", "shared", "--apply"});
    ASSERT_EQ(dropped.exit_code, 0) << dropped.out << dropped.err;
    cluster::EtcdClient client(client_config());
    auto meta = client.get(cluster::keys::meta("/shmipam", "shared"));
    ASSERT_TRUE(meta);
    EXPECT_FALSE(*meta);
    // Back, cut in /27 blocks (on node-1: node-0's state of the pool keeps the /28 it was
    // created with until it is removed).
    auto r = add(1, bigger, "b2");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    auto blocks = client.get_prefix(cluster::keys::blocks("/shmipam", "shared"));
    ASSERT_TRUE(blocks);
    ASSERT_EQ(blocks->size(), 1u);
    EXPECT_NE((*blocks)[0].key.find("-27"), std::string::npos) << (*blocks)[0].key;
    // On node-0, once its state of the old pool is removed, the pool is served in /27 too.
    auto removed = run_ctl({"--run-dir", dir.sub("node-0/run"), "states", "--config", conf,
                            "remove", "pool/shared", "--apply"});
    ASSERT_EQ(removed.exit_code, 0) << removed.out << removed.err;
    json node0 = node_with_pool(0, "shared", "10.77.0.0/24");
    node0["ipam"]["blockSize"] = 27;
    auto served = add(0, node0, "a4");
    ASSERT_EQ(served.exit_code, 0) << served.out << served.err;
    EXPECT_EQ(run_ctl({"cluster", "drop-pool", "--config", conf, "--pool", "a/b"}).exit_code, 2);
}

}  // namespace
}  // namespace shmipam::testing
