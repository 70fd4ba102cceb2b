// `cluster gc`'s decisions (cluster/cluster_gc.h) in process, over the in-memory store: which
// blocks and fixed claims of nodes gone go back, which are kept and why, a block claimed again
// between the read and the delete, and the lists refused as almost surely wrong.
// tests/cluster/ runs the real `shmipamctl cluster gc` against a real etcd.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "cluster/cluster_gc.h"
#include "cluster/key_schema.h"
#include "engine/ops/allocator.h"
#include "tests/support/block_views.h"
#include "tests/support/memory_kv.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;

constexpr const char* kPrefix = "/shmipam";
// When the node list was taken in these tests; blocks claimed well before it are old enough.
constexpr time_t kListTakenAt = 1'000'000;
constexpr time_t kNow = kListTakenAt + 10;
constexpr uint64_t kLongAgo = 1'000;

class ClusterGcDecisions : public ::testing::Test {
  protected:
    void put_block(const std::string& cidr, const std::string& node, uint64_t claimed) {
        MemoryKv kv(etcd);
        const json v{{"node", node}, {"nonce", cluster::nonce()}, {"claimedUnixS", claimed}};
        ASSERT_TRUE(
            kv.put(cluster::keys::block(kPrefix, "default", *engine::Cidr::parse(cidr)), v.dump()));
    }
    // The plan as the verb makes it: the store read, then the list.
    cluster::GcPlan plan(std::set<std::string> live) {
        MemoryKv kv(etcd);
        cluster::GcPlan p;
        auto blocks = cluster::BlockStore(kv, kPrefix).all_blocks();
        EXPECT_TRUE(blocks);
        if (blocks) p.blocks = *blocks;
        auto claims = cluster::FixedClaims(kv, kPrefix).everywhere();
        EXPECT_TRUE(claims);
        if (claims) p.claims = *claims;
        p.live_nodes = std::move(live);
        p.list_taken_at = kListTakenAt;
        p.block_min_age_s = 300;
        p.apply = true;
        return p;
    }
    Expected<std::vector<cluster::GcRow>> gc(const cluster::GcPlan& p) {
        MemoryKv kv(etcd);
        cluster::Guards
            guards;  // as the verb opens it (tools/cluster_setup.h): read, never stamped
        guards.stamp_schema = false;
        auto store = cluster::GuardedStore::open(kv, kPrefix, dir.sub("operator"), guards);
        if (!store) return store.error();
        return cluster::collect_garbage(*store, p, kNow);
    }
    static std::map<std::string, cluster::GcRow> by_block(const std::vector<cluster::GcRow>& rows) {
        std::map<std::string, cluster::GcRow> out;
        for (const auto& r : rows) out[r.block] = r;
        return out;
    }
    // A fixed claim of `node` with reclaim policy `keep_idle`, made as a take makes one.
    void take_fixed(const std::string& key, const std::string& node, const std::string& address,
                    uint64_t keep_idle) {
        MemoryKv kv(etcd);
        auto made = cluster::FixedClaims(kv, kPrefix)
                        .take("sts", key, node, keep_idle, [&](const std::set<std::string>&) {
                            return engine::IpAddress::parse(address);
                        });
        ASSERT_TRUE(made) << made.error().msg;
    }

    TempDir dir;
    MemoryEtcd etcd;
};

TEST_F(ClusterGcDecisions, OnlyOldBlocksOfNodesGoneGoBackAndAYoungOneSaysWhyItIsKept) {
    put_block("10.80.0.0/26", "node-live", kLongAgo);
    put_block("10.80.0.64/26", "node-gone", kLongAgo);
    put_block("10.80.0.128/26", "node-gone", uint64_t(kListTakenAt));
    put_block("10.80.0.192/26", "node-gone", uint64_t(kNow - 60));
    auto rows = gc(plan({"node-live"}));
    ASSERT_TRUE(rows) << rows.error().msg;
    auto r = by_block(*rows);
    EXPECT_EQ(r.count("10.80.0.0/26"), 0u) << "a live node's block is not even listed";
    EXPECT_TRUE(r["10.80.0.64/26"].released);
    EXPECT_FALSE(r["10.80.0.128/26"].released);
    EXPECT_EQ(r["10.80.0.128/26"].kept, "claimed after the node list was taken");
    EXPECT_FALSE(r["10.80.0.192/26"].released);
    const auto owners = block_owners(etcd, kPrefix, "default");
    EXPECT_EQ(owners.size(), 3u);
    EXPECT_EQ(owners.count("10.80.0.64/26"), 0u);
}

// The gone node's block was given back and claimed again by a live node between the gc's read
// and its delete: the delete compares the revision read, and the new owner keeps it.
TEST_F(ClusterGcDecisions, ABlockClaimedAgainBetweenTheReadAndTheDeleteIsLeftToItsNewOwner) {
    put_block("10.80.0.0/26", "node-live", kLongAgo);
    put_block("10.80.0.64/26", "node-gone", kLongAgo);
    const cluster::GcPlan p = plan({"node-live", "node-new"});
    const std::string key =
        cluster::keys::block(kPrefix, "default", *engine::Cidr::parse("10.80.0.64/26"));
    bool raced = false;
    etcd.before_call = [&](const std::string& call, const std::string& k) {
        if (call != "delete_at" || k != key || raced) return;
        raced = true;
        put_block("10.80.0.64/26", "node-new", uint64_t(kNow));
    };
    auto rows = gc(p);
    ASSERT_TRUE(raced) << "the gc never reached its delete";
    ASSERT_TRUE(rows) << rows.error().msg;
    EXPECT_FALSE(by_block(*rows)["10.80.0.64/26"].released);
    EXPECT_EQ(block_owners(etcd, kPrefix, "default")["10.80.0.64/26"], "node-new");
}

TEST_F(ClusterGcDecisions, AListNamingNoOwnerOrNoNodeIsRefusedAndNothingIsWritten) {
    put_block("10.80.0.0/26", "node-a", kLongAgo);
    put_block("10.80.0.64/26", "node-b", kLongAgo);
    const int64_t revision = etcd.revision();
    for (const std::set<std::string>& wrong :
         {std::set<std::string>{}, std::set<std::string>{"node-x"}}) {
        auto refused = gc(plan(wrong));
        ASSERT_FALSE(refused);
        EXPECT_EQ(refused.error().code, Code::kInvalidConfig);
        EXPECT_NE(refused.error().msg.find("refusing"), std::string::npos);
    }
    EXPECT_EQ(etcd.revision(), revision);
    cluster::GcPlan forced = plan({"node-x"});
    forced.force = true;
    auto rows = gc(forced);
    ASSERT_TRUE(rows);
    EXPECT_TRUE(block_owners(etcd, kPrefix, "default").empty()) << "--force gives them back";
}

TEST_F(ClusterGcDecisions, ADryRunListsWhatWouldGoAndWritesNothing) {
    put_block("10.80.0.0/26", "node-live", kLongAgo);
    put_block("10.80.0.64/26", "node-gone", kLongAgo);
    const int64_t revision = etcd.revision();
    cluster::GcPlan p = plan({"node-live"});
    p.apply = false;
    auto rows = gc(p);
    ASSERT_TRUE(rows);
    const auto r = by_block(*rows);
    ASSERT_EQ(r.count("10.80.0.64/26"), 1u);
    EXPECT_TRUE(r.at("10.80.0.64/26").kept.empty()) << "it would go";
    EXPECT_FALSE(r.at("10.80.0.64/26").released);
    EXPECT_EQ(etcd.revision(), revision);
}

// Fixed claims of a node gone go by their reclaim policy: none at once, never kept (named
// by the operator: released), a timed one idle from this gc when no DEL marked it.
TEST_F(ClusterGcDecisions, AFixedClaimOfANodeGoneGoesByItsPolicyOrWhenTheOperatorNamesIt) {
    put_block("10.80.0.0/26", "node-live", kLongAgo);
    take_fixed("sts:shop/at-delete/eth0", "node-gone", "10.78.0.1", format::kKeepIdleNone);
    take_fixed("sts:shop/forever/eth0", "node-gone", "10.78.0.2", format::kKeepIdleForever);
    take_fixed("sts:shop/timed/eth0", "node-gone", "10.78.0.3", 3600 + 1);
    take_fixed("sts:shop/named/eth0", "node-gone", "10.78.0.4", format::kKeepIdleForever);
    cluster::GcPlan p = plan({"node-live"});
    p.named_pod = "shop/named";
    auto rows = gc(p);
    ASSERT_TRUE(rows) << rows.error().msg;
    auto r = by_block(*rows);
    EXPECT_TRUE(r["claim sts:shop/at-delete/eth0 (10.78.0.1)"].released);
    EXPECT_FALSE(r["claim sts:shop/forever/eth0 (10.78.0.2)"].released);
    EXPECT_NE(r["claim sts:shop/forever/eth0 (10.78.0.2)"].kept.find("never"), std::string::npos);
    EXPECT_FALSE(r["claim sts:shop/timed/eth0 (10.78.0.3)"].released);
    EXPECT_TRUE(r["claim sts:shop/named/eth0 (10.78.0.4)"].released);
    MemoryKv kv(etcd);
    auto timed = cluster::FixedClaims(kv, kPrefix).get("sts", "sts:shop/timed/eth0");
    ASSERT_TRUE(timed && *timed);
    EXPECT_EQ((*timed)->idle_since_unix_s, uint64_t(kNow)) << "idle from this gc";
    auto named = cluster::FixedClaims(kv, kPrefix).get("sts", "sts:shop/named/eth0");
    ASSERT_TRUE(named);
    EXPECT_FALSE(*named);
}

}  // namespace
}  // namespace shmipam::testing
