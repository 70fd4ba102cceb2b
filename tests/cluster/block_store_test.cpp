// Block ownership against a real 3-member etcd (docs/cluster.md, "Blocks"): claim storms of
// several nodes end with every block owned once, a requested address claims its block or names
// its owner, releases compare revisions.
#include "cluster/block_store.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "tests/support/three_etcd_members.h"

namespace shmipam::cluster {
namespace {

using engine::Cidr;
using testing::EtcdCluster;

Cidr cidr(const char* text) {
    return *Cidr::parse(text);
}

TEST(BlockOrder, StartsAtAHashOfTheNodeAndCoversEveryBlockOnce) {
    const auto a = BlockStore::claim_order(cidr("10.1.0.0/24"), 28, "node-a");
    const auto b = BlockStore::claim_order(cidr("10.1.0.0/24"), 28, "node-b");
    ASSERT_EQ(a.size(), 16u);
    std::set<std::string> seen;
    for (const auto& c : a) seen.insert(c.to_string());
    EXPECT_EQ(seen.size(), 16u);
    EXPECT_TRUE(seen.count("10.1.0.0/28"));
    EXPECT_TRUE(seen.count("10.1.0.240/28"));
    // Eight nodes do not all start at the same block.
    std::set<std::string> starts;
    for (int n = 0; n < 8; ++n) {
        starts.insert(
            BlockStore::claim_order(cidr("10.1.0.0/24"), 28, "node-" + std::to_string(n))[0]
                .to_string());
    }
    EXPECT_GE(starts.size(), 4u);
    (void)b;
    EXPECT_EQ(BlockStore::claim_order(cidr("fd00::/120"), 124, "n").size(), 16u);
}

// Guards against: an IPv6 /64 cut into /122 blocks (2^58 of them) had no claim order at all,
// so every IPv6 ADD in cluster mode failed. A node now tries 4096 blocks from its start.
TEST(BlockOrder, AnIpv6Slash64HasBlocksToTry) {
    const auto order = BlockStore::claim_order(cidr("fd00:1::/64"), 122, "node-a");
    ASSERT_EQ(order.size(), 4096u);
    std::set<std::string> distinct;
    for (const auto& c : order) {
        EXPECT_TRUE(cidr("fd00:1::/64").contains(c.address)) << c.to_string();
        distinct.insert(c.to_string());
    }
    EXPECT_EQ(distinct.size(), 4096u);
}

class Blocks : public testing::ThreeEtcdMembers {
  protected:
    EtcdConfig config() const { return client_config(); }
};

// 8 nodes, 3 claimers each at once (concurrent ADDs that all need a block), on a /24 cut into
// /28 blocks with at most 4 blocks a node: all 16 blocks end up owned, each by one node, the
// node that was told it claimed it, and no node holds more than 4.
TEST_F(Blocks, AClaimStormOfEightNodesOwnsEveryBlockOnce) {
    const Cidr pool = cidr("10.90.0.0/24");
    std::mutex mu;
    std::map<std::string, std::string> claimed;  // block -> node told it claimed it
    std::vector<std::string> errors;
    std::vector<std::thread> threads;
    for (int n = 0; n < 8; ++n) {
        for (int t = 0; t < 3; ++t) {
            threads.emplace_back([&, n] {
                EtcdClient client(config());
                BlockStore store(client, "/shmipam");
                const std::string node = "node-" + std::to_string(n);
                for (;;) {
                    bool at_cap = false;
                    auto got = store.claim_next("storm", pool, 28, node, 4, &at_cap);
                    std::lock_guard<std::mutex> lock(mu);
                    if (!got) {
                        errors.push_back(got.error().msg);
                        return;
                    }
                    if (!*got) return;  // none left, or at the cap
                    // Two claimers of one node may both be handed the block one of them
                    // created (the node's ADDs share its arena); two nodes never.
                    const auto [it, fresh] = claimed.emplace((*got)->cidr.to_string(), node);
                    if (!fresh && it->second != node) {
                        errors.push_back("claimed by two nodes: " + it->first);
                    }
                }
            });
        }
    }
    for (auto& t : threads) t.join();
    ASSERT_TRUE(errors.empty()) << errors.front();
    EXPECT_EQ(claimed.size(), 16u);
    EtcdClient client(config());
    BlockStore store(client, "/shmipam");
    auto owned = store.blocks("storm");
    ASSERT_TRUE(owned);
    ASSERT_EQ(owned->size(), 16u);
    std::map<std::string, size_t> per_node;
    for (const Block& b : *owned) {
        EXPECT_EQ(claimed[b.cidr.to_string()], b.node) << b.cidr.to_string();
        ++per_node[b.node];
    }
    for (const auto& [node, n] : per_node) EXPECT_LE(n, 4u) << node;
}

TEST_F(Blocks, ARequestedAddressClaimsItsBlockOrNamesTheNodeThatOwnsIt) {
    EtcdClient client(config());
    BlockStore store(client, "/shmipam");
    const Cidr pool = cidr("10.91.0.0/24");
    auto a = store.claim_holding("p", pool, 26, *engine::IpAddress::parse("10.91.0.70"), "node-a");
    ASSERT_TRUE(a) << a.error().msg;
    EXPECT_EQ(a->cidr.to_string(), "10.91.0.64/26");
    auto again =
        store.claim_holding("p", pool, 26, *engine::IpAddress::parse("10.91.0.71"), "node-a");
    ASSERT_TRUE(again) << "ours already";
    auto b = store.claim_holding("p", pool, 26, *engine::IpAddress::parse("10.91.0.72"), "node-b");
    ASSERT_FALSE(b);
    EXPECT_EQ(b.error().code, Code::kRequestedAddressTaken);
    EXPECT_NE(b.error().msg.find("node-a"), std::string::npos) << b.error().msg;
    auto outside =
        store.claim_holding("p", pool, 26, *engine::IpAddress::parse("10.92.0.1"), "node-b");
    ASSERT_FALSE(outside);
    EXPECT_EQ(outside.error().code, Code::kRequestedAddressInvalid);
}

TEST_F(Blocks, AReleaseAtAStaleRevisionIsRefusedAndAnotherNodeMayClaimAReleasedBlock) {
    EtcdClient client(config());
    BlockStore store(client, "/shmipam");
    const Cidr pool = cidr("10.93.0.0/26");  // one /26 block
    auto a = store.claim_next("r", pool, 26, "node-a", 4);
    ASSERT_TRUE(a && *a);
    EXPECT_FALSE(*store.claim_next("r", pool, 26, "node-b", 4)) << "the pool is exhausted";
    Block stale = **a;
    stale.mod_revision -= 1;
    EXPECT_FALSE(*store.release("r", stale));
    ASSERT_TRUE(*store.release("r", **a));
    auto b = store.claim_next("r", pool, 26, "node-b", 4);
    ASSERT_TRUE(b && *b);
    EXPECT_EQ((*b)->node, "node-b");
    EXPECT_FALSE(*store.release("r", **a)) << "node-a's old revision never deletes node-b's block";
    EXPECT_EQ(store.blocks("r")->size(), 1u);
}

TEST_F(Blocks, ANodeAtItsCapIsToldSo) {
    EtcdClient client(config());
    BlockStore store(client, "/shmipam");
    const Cidr pool = cidr("10.94.0.0/24");
    ASSERT_TRUE(*store.claim_next("c", pool, 26, "node-a", 2));
    ASSERT_TRUE(*store.claim_next("c", pool, 26, "node-a", 2));
    bool at_cap = false;
    auto third = store.claim_next("c", pool, 26, "node-a", 2, &at_cap);
    ASSERT_TRUE(third);
    EXPECT_FALSE(*third);
    EXPECT_TRUE(at_cap);
}

// Guards against: blockSize is each node's config, and a node cutting the pool into /28 blocks
// could create one inside another node's /26: both handed out the same addresses. The first
// claim now records the pool's geometry; a node asking for another is refused.
TEST_F(Blocks, ANodeThatCutsThePoolOtherwiseIsRefused) {
    EtcdClient client(config());
    BlockStore store(client, "/shmipam");
    const Cidr pool = cidr("10.95.0.0/24");
    ASSERT_TRUE(store.check_geometry("g", pool, 26));
    ASSERT_TRUE(store.check_geometry("g", pool, 26)) << "the same again";
    auto other = store.check_geometry("g", pool, 28);
    ASSERT_FALSE(other);
    EXPECT_EQ(other.error().code, Code::kInvalidConfig);
    EXPECT_NE(other.error().msg.find("blockSize"), std::string::npos) << other.error().msg;
}

}  // namespace
}  // namespace shmipam::cluster
