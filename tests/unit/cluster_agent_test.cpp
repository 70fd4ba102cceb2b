// The cluster agent's decisions (cluster/agent.h) in process, over the in-memory store
// (tests/support/memory_kv.h): which block a node claims, what it waits for, which stores it
// refuses before writing anything, how a fixed claim moves between nodes, and the races the
// store's transactions settle, each interleaving chosen by the test. The same agent serves the
// real helper against a real etcd in tests/cluster/.
#include <gtest/gtest.h>

#include <ctime>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cluster/agent.h"
#include "cluster/block_cache.h"
#include "cluster/block_store.h"
#include "cluster/fixed_claims.h"
#include "cluster/guarded_store.h"
#include "cluster/key_schema.h"
#include "cluster/revision_floor.h"
#include "cluster/waiting.h"
#include "tests/support/block_views.h"
#include "tests/support/memory_kv.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;
namespace agent = cluster::agent;
namespace protocol = cluster::protocol;

constexpr const char* kPrefix = "/shmipam";
// How long serve() waits for a pool lock no other agent holds here.
constexpr uint64_t kLockWaitMs = 1000;

class ClusterAgent : public ::testing::Test {
  protected:
    protocol::Scope scope(const std::string& node, const std::string& pool = "default") const {
        return {json::object(), pool, node, dir.sub(node)};
    }
    // A /24 cut into /26 blocks: four of them.
    protocol::ClaimBlock claim(const std::string& node) const {
        protocol::ClaimBlock r;
        r.scope = scope(node);
        r.geometry.pool_cidr = *engine::Cidr::parse("10.80.0.0/24");
        r.geometry.block_prefix = 26;
        r.geometry.seen = cached(node);  // as the plugin asks: with the blocks its cache has
        return r;
    }
    Expected<agent::Answer> serve(const protocol::Request& r) {
        MemoryKv kv(etcd);
        return agent::serve(r, kv, {-1, kLockWaitMs});
    }
    protocol::BlockAnswer served_block(const protocol::Request& r) {
        auto a = serve(r);
        EXPECT_TRUE(a) << a.error().msg;
        if (!a) return {};
        return std::get<protocol::BlockAnswer>(*a);
    }
    std::vector<engine::Cidr> cached(const std::string& node) const {
        std::vector<engine::Cidr> out;
        for (const auto& c : cached_blocks(dir.sub(node), "default")) {
            out.push_back(*engine::Cidr::parse(c));
        }
        return out;
    }
    std::map<std::string, std::string> owners() { return block_owners(etcd, kPrefix, "default"); }
    static std::set<std::string> texts(const std::vector<engine::Cidr>& cidrs) {
        std::set<std::string> out;
        for (const auto& c : cidrs) out.insert(c.to_string());
        return out;
    }

    TempDir dir;
    MemoryEtcd etcd;
};

TEST_F(ClusterAgent, NodesClaimDistinctBlocksAndEachCacheHoldsExactlyItsOwn) {
    for (const char* node : {"node-a", "node-b", "node-c"}) {
        const auto a = served_block(claim(node));
        ASSERT_TRUE(a.claimed) << node;
        EXPECT_EQ(texts(a.blocks), std::set<std::string>{a.claimed->to_string()});
    }
    const auto owned = owners();
    ASSERT_EQ(owned.size(), 3u) << "three nodes, three distinct blocks";
    for (const char* node : {"node-a", "node-b", "node-c"}) {
        std::set<std::string> of_node;
        for (const auto& [block, owner] : owned) {
            if (owner == node) of_node.insert(block);
        }
        EXPECT_EQ(texts(cached(node)), of_node) << node;
    }
}

// Two nodes race for one block: the other node's create lands between this agent's read of
// the pool and its own create. The store's transaction settles it; this node takes the next
// block in its order and never reports or caches the other's.
TEST_F(ClusterAgent,
       ABlockTakenBetweenTheReadAndTheCreateGoesToTheOtherNodeAndThisOneTakesTheNext) {
    const auto order =
        cluster::BlockStore::claim_order(*engine::Cidr::parse("10.80.0.0/24"), 26, "node-a");
    const std::string contested = cluster::keys::block(kPrefix, "default", order.front());
    MemoryKv rival(etcd);
    bool raced = false;
    etcd.before_call = [&](const std::string& call, const std::string& key) {
        if (call != "create_if_absent" || key != contested || raced) return;
        raced = true;
        const json value{{"node", "node-b"}, {"nonce", cluster::nonce()}, {"claimedUnixS", 1}};
        ASSERT_TRUE(rival.put(contested, value.dump()));
    };
    const auto a = served_block(claim("node-a"));
    ASSERT_TRUE(raced) << "node-a never tried its first block: the race did not happen";
    ASSERT_TRUE(a.claimed);
    EXPECT_EQ(a.claimed->to_string(), order[1].to_string());
    EXPECT_EQ(owners()[order.front().to_string()], "node-b");
    EXPECT_EQ(texts(cached("node-a")), std::set<std::string>{order[1].to_string()});
}

// Two ADDs on a node each found their blocks full: the second agent, run after the first
// claimed, answers the block its caller did not know of and claims nothing more.
TEST_F(ClusterAgent, ABlockOfTheNodeItsCallerDidNotKnowIsAnsweredAndNothingMoreIsClaimed) {
    const protocol::ClaimBlock both_read_the_cache_empty = claim("node-a");
    const auto first = served_block(both_read_the_cache_empty);
    const auto second = served_block(both_read_the_cache_empty);
    ASSERT_TRUE(first.claimed && second.claimed);
    EXPECT_EQ(second.claimed->to_string(), first.claimed->to_string());
    EXPECT_EQ(owners().size(), 1u);
}

TEST_F(ClusterAgent, ANodeAtItsCapIsToldSoAndRecordsNoWait) {
    protocol::ClaimBlock r = claim("node-a");
    r.max_blocks = 1;
    ASSERT_TRUE(served_block(r).claimed);
    r.geometry.seen = cached("node-a");
    const auto capped = served_block(r);
    EXPECT_FALSE(capped.claimed);
    EXPECT_TRUE(capped.at_cap);
    MemoryKv kv(etcd);
    auto waiters = cluster::Waiting(kv, kPrefix).waiters("default", uint64_t(std::time(nullptr)));
    ASSERT_TRUE(waiters);
    EXPECT_TRUE(waiters->empty()) << "a node at its cap waits for no other node's block";
}

// The pool has no block left: the node records that it waits, and is told which nodes hold the
// pool's blocks; a claim ahead of need records nothing.
TEST_F(ClusterAgent, ANodeFindingNoBlockRecordsThatItWaitsAndIsToldWhoHoldsThem) {
    for (const char* node : {"node-a", "node-b", "node-c", "node-d"}) {
        ASSERT_TRUE(served_block(claim(node)).claimed) << node;
    }
    protocol::ClaimBlock ahead = claim("node-e");
    ahead.ahead = true;
    EXPECT_FALSE(served_block(ahead).claimed);
    MemoryKv kv(etcd);
    auto waiters = cluster::Waiting(kv, kPrefix).waiters("default", uint64_t(std::time(nullptr)));
    ASSERT_TRUE(waiters);
    EXPECT_TRUE(waiters->empty()) << "a claim ahead of need is no wait";
    const auto none = served_block(claim("node-e"));
    EXPECT_FALSE(none.claimed);
    EXPECT_FALSE(none.at_cap);
    EXPECT_EQ(none.holders, (std::vector<std::string>{"node-a", "node-b", "node-c", "node-d"}));
    EXPECT_TRUE(none.waiting_for.empty()) << "no block is recorded idle";
    waiters = cluster::Waiting(kv, kPrefix).waiters("default", uint64_t(std::time(nullptr)));
    ASSERT_TRUE(waiters);
    ASSERT_EQ(waiters->size(), 1u);
    EXPECT_EQ(waiters->front().node, "node-e");
}

TEST_F(ClusterAgent, OnlyBlocksWithAnAllocatableAddressAreClaimed) {
    protocol::ClaimBlock r = claim("node-a");
    // Only the last block holds allocatable addresses.
    r.geometry.usable = {
        {*engine::IpAddress::parse("10.80.0.200"), *engine::IpAddress::parse("10.80.0.210")}};
    const auto a = served_block(r);
    ASSERT_TRUE(a.claimed);
    EXPECT_EQ(a.claimed->to_string(), "10.80.0.192/26");
    r.geometry.seen = cached("node-a");
    EXPECT_FALSE(served_block(r).claimed) << "no other block is worth claiming";
    EXPECT_EQ(owners().size(), 1u);
}

// The guards: each store below is refused with code 7 before anything is written into it, and
// the node's cache is left as it was.
TEST_F(ClusterAgent, AnotherClusterIsRefusedBeforeAnythingIsWrittenOrCached) {
    ASSERT_TRUE(served_block(claim("node-a")).claimed);
    const auto cache_before = texts(cached("node-a"));
    etcd.set_cluster_id(0xabcdef);
    const int64_t revision = etcd.revision();
    auto refused = serve(claim("node-a"));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, Code::kInvalidConfig);
    EXPECT_NE(refused.error().msg.find("refusing"), std::string::npos) << refused.error().msg;
    EXPECT_EQ(etcd.revision(), revision) << "nothing written";
    EXPECT_EQ(texts(cached("node-a")), cache_before);
}

TEST_F(ClusterAgent, AStoreGoneBackInTimeIsRefusedBeforeAnythingIsWrittenOrCached) {
    const MemoryEtcd::State empty = etcd.state();
    ASSERT_TRUE(served_block(claim("node-a")).claimed);
    const auto cache_before = texts(cached("node-a"));
    // Restored from a snapshot taken before the claim: the same cluster id, a lower revision.
    etcd.restore(empty);
    auto refused = serve(claim("node-a"));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, Code::kInvalidConfig);
    EXPECT_NE(refused.error().msg.find("went back in time"), std::string::npos)
        << refused.error().msg;
    EXPECT_EQ(etcd.revision(), empty.revision) << "not even the schema record was written";
    EXPECT_EQ(texts(cached("node-a")), cache_before) << "a refresh would have emptied it";
}

TEST_F(ClusterAgent, AStoreOfTheEarlierLayoutIsRefusedUntilMigrated) {
    MemoryKv kv(etcd);
    ASSERT_TRUE(kv.put(cluster::keys::v1_pools(kPrefix) + "default/blocks/10.80.0.0-26",
                       R"({"node": "node-z", "nonce": "1", "claimedUnixS": 1})"));
    const int64_t revision = etcd.revision();
    auto refused = serve(claim("node-a"));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, Code::kInvalidConfig);
    EXPECT_NE(refused.error().msg.find("cluster migrate"), std::string::npos);
    EXPECT_EQ(etcd.revision(), revision);
}

// An unreachable store fails the agent with code 50 and leaves its message for the agents and
// ADDs that waited for the pool lock meanwhile; the node's floor still rises to what it saw.
TEST_F(ClusterAgent, AnUnreachableStoreFailsWithCodeFiftyAndLeavesItsMessageForTheWaiters) {
    ASSERT_TRUE(served_block(claim("node-a")).claimed);
    const int64_t seen = etcd.revision();
    // An agent that started waiting for the lock a second before this one failed (file times
    // come from the kernel's coarse clock, a tick behind a clock_gettime made just before).
    timespec waiting_since{};
    ::clock_gettime(CLOCK_REALTIME, &waiting_since);
    waiting_since.tv_sec -= 1;
    etcd.fail_calls(1000);
    auto failed = serve(claim("node-a"));
    ASSERT_FALSE(failed);
    EXPECT_EQ(failed.error().code, Code::kUnavailable);
    const cluster::NodeFiles files{dir.sub("node-a"), ""};
    auto told = cluster::unavailable_since(files, "default", waiting_since);
    ASSERT_TRUE(told) << "no message left for the agents waiting on the lock";
    EXPECT_EQ(told->code, Code::kUnavailable);
    auto floor = cluster::remembered_revision(dir.sub("node-a"));
    ASSERT_TRUE(floor);
    EXPECT_EQ(*floor, seen);
}

protocol::TakeFixed take(const protocol::Scope& s, const std::string& key) {
    protocol::TakeFixed r;
    r.scope = s;
    r.claim_key = key;
    r.pool_cidr = *engine::Cidr::parse("10.78.0.0/28");
    r.usable = {{*engine::IpAddress::parse("10.78.0.1"), *engine::IpAddress::parse("10.78.0.14")}};
    return r;
}

// A StatefulSet pod rescheduled to another node keeps its address; the old node's late DEL
// cannot give the claim up, since it names the new node now.
TEST_F(ClusterAgent, AFixedClaimMovesWithItsPodAndALateGiveUpOnTheOldNodeCannotTakeItBack) {
    const std::string key = "sts:shop/db-0/eth0";
    auto first = serve(take(scope("node-a", "sts"), key));
    ASSERT_TRUE(first) << first.error().msg;
    const auto on_a = std::get<protocol::FixedAnswer>(*first);
    EXPECT_EQ(on_a.address.to_string(), "10.78.0.1");
    auto moved = serve(take(scope("node-b", "sts"), key));
    ASSERT_TRUE(moved) << moved.error().msg;
    const auto on_b = std::get<protocol::FixedAnswer>(*moved);
    EXPECT_EQ(on_b.address.to_string(), on_a.address.to_string());
    EXPECT_EQ(on_b.moved_from, "node-a");
    protocol::GiveUpFixed late{scope("node-a", "sts"), key, "", "eth0"};
    auto given = serve(late);
    ASSERT_TRUE(given);
    EXPECT_FALSE(std::get<protocol::GiveUpAnswer>(*given).released);
    auto owner = serve(protocol::ReadFixed{scope("node-a", "sts"), key});
    ASSERT_TRUE(owner);
    EXPECT_EQ(std::get<protocol::FixedOwnerAnswer>(*owner).node, "node-b");
}

// Node b takes the claim over between node a's read of it and a's delete: a's give-up is
// refused by the store (it compares the revision read), and the claim stays node b's.
TEST_F(ClusterAgent, AGiveUpRacingATakeOverOnAnotherNodeLeavesTheClaimWithTheOtherNode) {
    const std::string key = "sts:shop/db-0/eth0";
    ASSERT_TRUE(serve(take(scope("node-a", "sts"), key)));
    const std::string claim_key = cluster::keys::claim(kPrefix, "sts", key);
    bool raced = false;
    etcd.before_call = [&](const std::string& call, const std::string& k) {
        if (call != "txn" || k != claim_key || raced) return;
        raced = true;
        MemoryKv node_b(etcd);
        auto store = cluster::GuardedStore::open(node_b, kPrefix, dir.sub("node-b"), {});
        ASSERT_TRUE(store);
        const protocol::Scope b_scope = scope("node-b", "sts");
        const agent::Context b{b_scope, {dir.sub("node-b"), ""}, *store};
        auto taken = agent::take_fixed(b, take(b_scope, key));
        ASSERT_TRUE(taken) << taken.error().msg;
        EXPECT_EQ(taken->moved_from, "node-a");
    };
    auto given = serve(protocol::GiveUpFixed{scope("node-a", "sts"), key, "", "eth0"});
    ASSERT_TRUE(raced) << "node a's give-up never reached its delete";
    ASSERT_TRUE(given) << given.error().msg;
    EXPECT_FALSE(std::get<protocol::GiveUpAnswer>(*given).released);
    MemoryKv kv(etcd);
    auto held = cluster::FixedClaims(kv, kPrefix).get("sts", key);
    ASSERT_TRUE(held && *held);
    EXPECT_EQ((*held)->node, "node-b");
}

TEST_F(ClusterAgent, ARequestedFixedAddressIsTakenWhenFreeAndRefusedNamingItWhenHeld) {
    protocol::TakeFixed wants = take(scope("node-a", "sts"), "sts:shop/db-0/eth0");
    wants.address = engine::IpAddress::parse("10.78.0.9");
    auto got = serve(wants);
    ASSERT_TRUE(got) << got.error().msg;
    EXPECT_EQ(std::get<protocol::FixedAnswer>(*got).address.to_string(), "10.78.0.9");
    protocol::TakeFixed also = take(scope("node-b", "sts"), "sts:shop/db-1/eth0");
    also.address = wants.address;
    auto refused = serve(also);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, Code::kRequestedAddressTaken);
    EXPECT_NE(refused.error().msg.find("10.78.0.9"), std::string::npos);
}

}  // namespace
}  // namespace shmipam::testing
