// The node pass's decisions (cluster/node_pass.h) in process, over the in-memory store and a
// made-up node (what its pool states say is set by each test): blocks adopted and dropped, idle
// blocks given back to waiting nodes one per waiter, a withdrawn pool's blocks given back, and
// fixed claims that moved while a sandbox here uses them. tests/cluster/node_pass_test.cpp runs
// the real `shmipamctl cluster pass` against a real etcd and real pool states.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "cluster/agent.h"
#include "cluster/block_cache.h"
#include "cluster/key_schema.h"
#include "cluster/node_pass.h"
#include "engine/addr/fingerprint.h"
#include "tests/support/block_views.h"
#include "tests/support/made_up_node.h"
#include "tests/support/memory_kv.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using cluster::PassRow;
using nlohmann::json;
namespace protocol = cluster::protocol;

constexpr const char* kPrefix = "/shmipam";
constexpr uint64_t kLockWaitMs = 1000;

class NodePassDecisions : public ::testing::Test {
  protected:
    protocol::ClaimBlock claim(const std::string& node) const {
        protocol::ClaimBlock r;
        r.scope = {json::object(), "default", node, dir.sub(node)};
        r.geometry.pool_cidr = *engine::Cidr::parse("10.80.0.0/24");
        r.geometry.block_prefix = 26;
        auto cached =
            cluster::read_block_cache(cluster::block_cache_path(dir.sub(node), "default"));
        if (cached) {
            for (const auto& b : *cached) r.geometry.seen.push_back(b.cidr);
        }
        return r;
    }
    // What the node's agent answered (its ADD's claim).
    protocol::BlockAnswer claimed(const std::string& node) {
        MemoryKv kv(etcd);
        auto a = cluster::agent::serve(claim(node), kv, {-1, kLockWaitMs});
        EXPECT_TRUE(a) << a.error().msg;
        return a ? std::get<protocol::BlockAnswer>(*a) : protocol::BlockAnswer{};
    }
    // One pass of `node` over the pool, with `side` as its states.
    std::vector<PassRow> pass(const std::string& node, MadeUpNode& side, bool configured = true) {
        MemoryKv kv(etcd);
        auto store = cluster::GuardedStore::open(kv, kPrefix, dir.sub(node), {});
        EXPECT_TRUE(store) << store.error().msg;
        if (!store) return {};
        const cluster::PassNode n{node, {dir.sub(node), ""}, /*block_min_age_s=*/0, kLockWaitMs};
        auto rows = cluster::pass_pool(*store, n, side, "default", configured);
        EXPECT_TRUE(rows) << rows.error().msg;
        return rows ? *rows : std::vector<PassRow>{};
    }
    std::map<std::string, std::string> owners() { return block_owners(etcd, kPrefix, "default"); }
    std::set<std::string> cached(const std::string& node) const {
        return cached_blocks(dir.sub(node), "default");
    }
    static std::vector<PassRow> of(const std::vector<PassRow>& rows, PassRow::Action action) {
        std::vector<PassRow> out;
        for (const auto& r : rows) {
            if (r.action == action) out.push_back(r);
        }
        return out;
    }

    TempDir dir;
    MemoryEtcd etcd;
};

// A gc gave one of the node's blocks to another node, and the store gives the node one its cache
// lacks (an agent died after claiming it): the pass adopts that one and drops the other, naming
// its new owner and the addresses the node still uses in it.
TEST_F(NodePassDecisions, AdoptsABlockTheStoreGivesTheNodeAndDropsOneTakenNamingItsOwner) {
    const auto first = claimed("node-a");
    ASSERT_TRUE(first.claimed);
    const std::string taken = first.claimed->to_string();
    MemoryKv kv(etcd);
    cluster::BlockStore store(kv, kPrefix);
    auto blocks = store.blocks("default");
    ASSERT_TRUE(blocks && blocks->size() == 1);
    ASSERT_TRUE(store.release("default", blocks->front()));
    const json theirs{{"node", "node-b"}, {"nonce", cluster::nonce()}, {"claimedUnixS", 1}};
    ASSERT_TRUE(kv.put(store.key_of("default", *first.claimed), theirs.dump()));
    const auto order =
        cluster::BlockStore::claim_order(*engine::Cidr::parse("10.80.0.0/24"), 26, "node-a");
    const engine::Cidr unseen = order[1].to_string() == taken ? order[2] : order[1];
    const json ours{{"node", "node-a"}, {"nonce", cluster::nonce()}, {"claimedUnixS", 1}};
    ASSERT_TRUE(kv.put(store.key_of("default", unseen), ours.dump()));

    MadeUpNode side;
    side.use.found = cluster::PoolUse::Found::kArenas;
    side.use.blocks[taken].in_use = 3;
    const auto rows = pass("node-a", side);
    const auto adopted = of(rows, PassRow::Action::kAdopted);
    const auto dropped = of(rows, PassRow::Action::kDropped);
    ASSERT_EQ(adopted.size(), 1u);
    EXPECT_EQ(adopted[0].block, unseen.to_string());
    ASSERT_EQ(dropped.size(), 1u);
    EXPECT_EQ(dropped[0].block, taken);
    EXPECT_EQ(dropped[0].owner, "node-b");
    EXPECT_EQ(dropped[0].in_use, 3u);
    EXPECT_EQ(cached("node-a"), std::set<std::string>{unseen.to_string()});
}

// One node waits; two nodes hold idle blocks. Each pass first records its idle blocks; a later
// pass gives one back, by the first idle holder by name, and the other keeps its blocks since
// the block given back serves the waiter.
TEST_F(NodePassDecisions, OneWaitingNodeMakesOneIdleNodeGiveABlockBackNotEveryIdleNode) {
    for (const char* node : {"node-a", "node-a", "node-b", "node-b"}) {
        ASSERT_TRUE(claimed(node).claimed) << node;
    }
    const auto none = claimed("node-c");
    ASSERT_FALSE(none.claimed) << "the pool is full";
    MadeUpNode never_used;  // no state of the pool on these nodes: every block is idle
    EXPECT_TRUE(of(pass("node-a", never_used), PassRow::Action::kGaveBack).empty())
        << "a block is given back only by a pass after the one that recorded it idle";
    EXPECT_TRUE(of(pass("node-b", never_used), PassRow::Action::kGaveBack).empty());
    const auto by_a = of(pass("node-a", never_used), PassRow::Action::kGaveBack);
    const auto by_b = of(pass("node-b", never_used), PassRow::Action::kGaveBack);
    ASSERT_EQ(by_a.size(), 1u);
    EXPECT_EQ(by_a[0].waiters, std::vector<std::string>{"node-c"});
    EXPECT_TRUE(by_b.empty()) << "one waiter, one block given back";
    size_t held_by_a = 0;
    for (const auto& [block, owner] : owners()) held_by_a += owner == "node-a";
    EXPECT_EQ(held_by_a, 1u);
    EXPECT_EQ(cached("node-a").size(), 1u) << "the block left the cache before the store";
    EXPECT_TRUE(claimed("node-c").claimed) << "the waiter claims the block given back";
}

TEST_F(NodePassDecisions, ABlockInUseOrOfANodeThatCannotTellIsNeverGivenBack) {
    for (const char* node : {"node-a", "node-a", "node-b", "node-b"}) {
        ASSERT_TRUE(claimed(node).claimed) << node;
    }
    ASSERT_FALSE(claimed("node-c").claimed);
    MadeUpNode busy;
    busy.use.found = cluster::PoolUse::Found::kArenas;
    for (const auto& [block, owner] : owners()) busy.use.blocks[block].in_use = 1;
    MadeUpNode unknown;
    unknown.use.found = cluster::PoolUse::Found::kUnknown;
    for (int round = 0; round < 2; ++round) {
        EXPECT_TRUE(of(pass("node-a", busy), PassRow::Action::kGaveBack).empty());
        EXPECT_TRUE(of(pass("node-b", unknown), PassRow::Action::kGaveBack).empty());
    }
    EXPECT_EQ(owners().size(), 4u);
    MemoryKv kv(etcd);
    auto idle = cluster::Waiting(kv, kPrefix).idle("default");
    ASSERT_TRUE(idle);
    EXPECT_TRUE(idle->empty()) << "no block was recorded idle";
}

TEST_F(NodePassDecisions, AWithdrawnPoolsBlocksAllGoBackEvenTheLast) {
    ASSERT_TRUE(claimed("node-a").claimed);
    ASSERT_TRUE(claimed("node-a").claimed);
    MadeUpNode never_used;
    const auto given =
        of(pass("node-a", never_used, /*configured=*/false), PassRow::Action::kGaveBack);
    EXPECT_EQ(given.size(), 2u);
    EXPECT_TRUE(owners().empty());
    EXPECT_TRUE(cached("node-a").empty());
}

TEST_F(NodePassDecisions, AFixedClaimThatMovedWhileASandboxHereUsesItIsReportedWithItsNewNode) {
    const std::string key = "sts:shop/db-0/eth0";
    for (const char* node : {"node-a", "node-b"}) {
        protocol::TakeFixed r;
        r.scope = {json::object(), "sts", node, dir.sub(node)};
        r.claim_key = key;
        r.pool_cidr = *engine::Cidr::parse("10.78.0.0/28");
        r.usable = {
            {*engine::IpAddress::parse("10.78.0.1"), *engine::IpAddress::parse("10.78.0.14")}};
        MemoryKv kv(etcd);
        ASSERT_TRUE(cluster::agent::serve(r, kv, {-1, kLockWaitMs})) << node;
    }
    MadeUpNode side;
    engine::ClaimView local;
    local.key = key;
    local.fp = engine::fingerprint(key, "eth0");
    local.addresses = {*engine::IpAddress::parse("10.78.0.1")};
    local.use = engine::ClaimView::Use::kInUse;
    local.container_id = "sandbox-on-a";
    side.claims = {local};
    MemoryKv kv(etcd);
    auto rows = cluster::moved_claims(kv, kPrefix, "node-a", side, "sts");
    ASSERT_TRUE(rows) << rows.error().msg;
    ASSERT_EQ(rows->size(), 1u);
    EXPECT_EQ((*rows)[0].owner, "node-b");
    EXPECT_EQ((*rows)[0].container, "sandbox-on-a");
    auto on_b = cluster::moved_claims(kv, kPrefix, "node-b", side, "sts");
    ASSERT_TRUE(on_b);
    EXPECT_TRUE(on_b->empty()) << "node b holds it at that address: nothing to report";
}

}  // namespace
}  // namespace shmipam::testing
