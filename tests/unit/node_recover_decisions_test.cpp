// A node's recovery after the store went back in time (cluster/node_recover.h) in process, over
// the in-memory store restored from an earlier snapshot and a made-up node: what the node holds
// is put back only where absent, a block or address the new store gives another node is left to
// it and named, and the node accepts the store only when nothing is left in conflict.
// tests/cluster/store_rebuild_test.cpp runs the real `shmipamctl cluster recover` against a real
// etcd restored from a snapshot.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cluster/agent.h"
#include "cluster/fixed_claims.h"
#include "cluster/node_recover.h"
#include "cluster/revision_floor.h"
#include "engine/addr/fingerprint.h"
#include "tests/support/block_views.h"
#include "tests/support/made_up_node.h"
#include "tests/support/memory_kv.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using cluster::RecoverRow;
using nlohmann::json;
namespace protocol = cluster::protocol;

constexpr const char* kPrefix = "/shmipam";
constexpr uint64_t kLockWaitMs = 1000;
const std::string kClaimKey = "sts:shop/db-0/eth0";

engine::ClaimView claim_view(const std::string& key, const std::string& address) {
    engine::ClaimView c;
    c.key = key;
    c.fp = engine::fingerprint(key, cluster::ifname_of_claim_key(key));
    c.addresses = {*engine::IpAddress::parse(address)};
    c.use = engine::ClaimView::Use::kInUse;
    return c;
}

class NodeRecoverDecisions : public ::testing::Test {
  protected:
    // node-a claims a block of "default" and takes the fixed address of kClaimKey in "sts"
    // (10.78.0.1), and its sandbox uses it; then the store is restored to before both.
    void SetUp() override {
        const MemoryEtcd::State before = etcd.state();
        protocol::ClaimBlock c;
        c.scope = {json::object(), "default", "node-a", dir.sub("node-a")};
        c.geometry.pool_cidr = *engine::Cidr::parse("10.80.0.0/24");
        c.geometry.block_prefix = 26;
        auto got = serve(c);
        ASSERT_TRUE(got) << got.error().msg;
        const auto& answer = std::get<protocol::BlockAnswer>(*got);
        ASSERT_TRUE(answer.claimed);
        block = *answer.claimed;

        protocol::TakeFixed t;
        t.scope = {json::object(), "sts", "node-a", dir.sub("node-a")};
        t.claim_key = kClaimKey;
        t.pool_cidr = *engine::Cidr::parse("10.78.0.0/28");
        t.usable = {
            {*engine::IpAddress::parse("10.78.0.1"), *engine::IpAddress::parse("10.78.0.14")}};
        auto took = serve(t);
        ASSERT_TRUE(took) << took.error().msg;
        node.claims = {claim_view(kClaimKey, "10.78.0.1")};

        auto floor = cluster::remembered_revision(dir.sub("node-a"));
        ASSERT_TRUE(floor && *floor > before.revision) << "the agent remembers what it saw";
        etcd.restore(before);
        ASSERT_FALSE(open_guarded()) << "the node refuses the store gone back in time";
    }

    Expected<cluster::agent::Answer> serve(const protocol::Request& r) {
        MemoryKv kv(etcd);
        return cluster::agent::serve(r, kv, {-1, kLockWaitMs});
    }
    // The store as the node's agents open it: every guard.
    Expected<cluster::GuardedStore> open_guarded() {
        return cluster::GuardedStore::open(client, kPrefix, dir.sub("node-a"), {});
    }
    cluster::RecoverReport recover(bool apply) {
        cluster::Guards guards{cluster::Guards::ClusterId::kIgnore};
        guards.check_revision_floor = false;
        guards.stamp_schema = false;
        auto store = cluster::GuardedStore::open(client, kPrefix, dir.sub("node-a"), guards);
        EXPECT_TRUE(store) << store.error().msg;
        if (!store) return {};
        const cluster::RecoverNode n{"node-a", {dir.sub("node-a"), ""}, {"sts"}, kLockWaitMs};
        auto report = cluster::recover_node(*store, n, node, apply);
        EXPECT_TRUE(report) << report.error().msg;
        return report ? *report : cluster::RecoverReport{};
    }
    std::vector<cluster::FixedClaim> store_claims() {
        auto all = cluster::FixedClaims(client, kPrefix).all("sts");
        EXPECT_TRUE(all);
        return all ? *all : std::vector<cluster::FixedClaim>{};
    }
    static RecoverRow::Outcome outcome_of(const cluster::RecoverReport& r,
                                          const std::string& what_starts) {
        for (const auto& row : r.rows) {
            if (row.what.rfind(what_starts, 0) == 0) return row.outcome;
        }
        ADD_FAILURE() << "no row for " << what_starts;
        return RecoverRow::Outcome::kCannot;
    }

    TempDir dir;
    MemoryEtcd etcd;
    MemoryKv client{etcd};
    MadeUpNode node;
    engine::Cidr block;
};

TEST_F(NodeRecoverDecisions, ADryRunListsWhatItWouldRecreateAndChangesNothing) {
    const int64_t revision = etcd.revision();
    const int64_t floor = *cluster::remembered_revision(dir.sub("node-a"));
    const auto r = recover(/*apply=*/false);
    EXPECT_TRUE(r.floor_ahead);
    EXPECT_EQ(outcome_of(r, "block " + block.to_string()), RecoverRow::Outcome::kMissing);
    EXPECT_EQ(outcome_of(r, "claim " + kClaimKey), RecoverRow::Outcome::kMissing);
    EXPECT_TRUE(r.work_left(false));
    EXPECT_FALSE(r.accepted);
    EXPECT_EQ(etcd.revision(), revision) << "a dry run writes nothing";
    EXPECT_EQ(*cluster::remembered_revision(dir.sub("node-a")), floor);
    EXPECT_FALSE(open_guarded()) << "still refused";
}

TEST_F(NodeRecoverDecisions, ApplyPutsTheBlockAndTheFixedClaimBackAndAcceptsTheStore) {
    const auto r = recover(/*apply=*/true);
    EXPECT_EQ(outcome_of(r, "block " + block.to_string()), RecoverRow::Outcome::kRecreated);
    EXPECT_EQ(outcome_of(r, "claim " + kClaimKey), RecoverRow::Outcome::kRecreated);
    EXPECT_TRUE(r.accepted);
    EXPECT_FALSE(r.work_left(true));
    EXPECT_EQ(block_owners(etcd, kPrefix, "default")[block.to_string()], "node-a");
    const auto claims = store_claims();
    ASSERT_EQ(claims.size(), 1u);
    EXPECT_EQ(claims[0].key, kClaimKey);
    EXPECT_EQ(claims[0].node, "node-a");
    EXPECT_EQ(claims[0].address.to_string(), "10.78.0.1");
    EXPECT_EQ(*cluster::remembered_revision(dir.sub("node-a")), etcd.revision());
    auto opened = open_guarded();
    EXPECT_TRUE(opened) << "the node accepts the store: " << opened.error().msg;

    const auto again = recover(/*apply=*/true);
    EXPECT_EQ(again.count(RecoverRow::Outcome::kPresent), again.rows.size())
        << "a second run finds everything present";
}

TEST_F(NodeRecoverDecisions, ABlockAndAnAddressTheNewStoreGivesAnotherNodeAreNamedAndNotAccepted) {
    cluster::BlockStore blocks(client, kPrefix);
    ASSERT_TRUE(blocks.claim_holding("default", block, block.prefix, block.network(), "node-b"));
    auto theirs = cluster::FixedClaims(client, kPrefix)
                      .restore("sts", "sts:shop/db-1/eth0", *engine::IpAddress::parse("10.78.0.1"),
                               "node-b", 0, 0);
    ASSERT_TRUE(theirs);
    const int64_t floor_before = *cluster::remembered_revision(dir.sub("node-a"));

    const auto r = recover(/*apply=*/true);
    ASSERT_EQ(r.count(RecoverRow::Outcome::kConflict), 2u);
    for (const auto& row : r.rows) {
        if (row.outcome != RecoverRow::Outcome::kConflict) continue;
        EXPECT_NE(row.why.find("node-b"), std::string::npos) << row.what << ": " << row.why;
    }
    EXPECT_FALSE(r.accepted);
    EXPECT_TRUE(r.work_left(true));
    EXPECT_EQ(block_owners(etcd, kPrefix, "default")[block.to_string()], "node-b");
    const auto claims = store_claims();
    ASSERT_EQ(claims.size(), 1u) << "node-a's claim is not made on node-b's address";
    EXPECT_EQ(claims[0].key, "sts:shop/db-1/eth0");
    EXPECT_EQ(*cluster::remembered_revision(dir.sub("node-a")), floor_before);
    EXPECT_FALSE(open_guarded()) << "with a conflict left the node stays refused";
}

TEST_F(NodeRecoverDecisions, AClaimKeyTheStateHoldsCutShortIsReportedAndNotRecreated) {
    engine::ClaimView cut = claim_view(kClaimKey, "10.78.0.1");
    cut.key = kClaimKey.substr(0, 10);  // the entry's field held only this much
    node.claims = {cut};
    const auto r = recover(/*apply=*/true);
    EXPECT_EQ(outcome_of(r, "claim " + cut.key), RecoverRow::Outcome::kCannot);
    EXPECT_FALSE(r.accepted);
    EXPECT_TRUE(store_claims().empty());
}

}  // namespace
}  // namespace shmipam::testing
