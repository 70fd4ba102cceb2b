// Fixed-address claims against a real 3-member etcd (cluster/fixed_claims.h): deterministic
// two-writer interleavings at the one step where two nodes starting the same pod can cross.
#include "cluster/fixed_claims.h"

#include <gtest/gtest.h>

#include "cluster/key_schema.h"
#include "tests/support/three_etcd_members.h"

namespace shmipam::cluster {
namespace {

// A take that lets a second writer's whole take run between its read of the claim and its
// listing of the taken addresses.
class InterleavedClaims : public FixedClaims {
  public:
    InterleavedClaims(EtcdClient& etcd, std::function<void()> second)
        : FixedClaims(etcd, "/shmipam"), second_(std::move(second)) {}

  protected:
    void between_read_and_list() override {
        if (second_) std::exchange(second_, nullptr)();
    }

  private:
    std::function<void()> second_;
};

class FixedClaimRace : public testing::ThreeEtcdMembers {};

// The first free address of a pool that holds only `only`.
FixedClaims::Pick only(const char* text) {
    return [a = *engine::IpAddress::parse(text)](const std::set<std::string>& taken) {
        return taken.count(a.to_string()) ? std::nullopt : std::optional(a);
    };
}

// Found by CI (FixedAcrossNodes.PodsStartingAtOnceOnManyNodes...): a StatefulSet pod started on
// two nodes at once. Node b read no claim; node a then created it, with the pool's last free
// address; node b listed the taken addresses, found none left and failed the pod with 100
// instead of reading the claim again and taking it over.
TEST_F(FixedClaimRace, AClaimCreatedBetweenTheReadAndTheListingIsTakenOverNotReportedAsPoolFull) {
    EtcdClient a_client(client_config()), b_client(client_config());
    FixedClaims a(a_client, "/shmipam");
    Expected<FixedClaim> a_took = make_error(Code::kInternal, "node a's take did not run");
    InterleavedClaims b(b_client, [&] {
        a_took = a.take("sts", "sts:shop/db-0/eth0", "node-a", 0, only("10.78.0.2"));
    });
    std::string moved_from;
    auto b_took = b.take("sts", "sts:shop/db-0/eth0", "node-b", 0, only("10.78.0.2"), &moved_from);
    ASSERT_TRUE(a_took) << a_took.error().msg;
    ASSERT_TRUE(b_took) << b_took.error().msg;
    EXPECT_EQ(b_took->address.to_string(), "10.78.0.2");
    EXPECT_EQ(moved_from, "node-a");
    auto all = a.all("sts");
    ASSERT_TRUE(all) << all.error().msg;
    ASSERT_EQ(all->size(), 1u) << "one pod, one claim";
    EXPECT_EQ((*all)[0].node, "node-b") << "the later start holds it";
}

// The same step, when what was created meanwhile is another pod's claim on the last address:
// the pool is full, and the pod is told so (100), not made to wait or retry.
TEST_F(FixedClaimRace, AnotherPodsClaimOnTheLastAddressCreatedMeanwhileLeavesThePoolFull) {
    EtcdClient a_client(client_config()), b_client(client_config());
    FixedClaims a(a_client, "/shmipam");
    InterleavedClaims b(b_client, [&] {
        ASSERT_TRUE(a.take("sts", "sts:shop/db-1/eth0", "node-a", 0, only("10.78.0.2")));
    });
    auto b_took = b.take("sts", "sts:shop/db-0/eth0", "node-b", 0, only("10.78.0.2"));
    ASSERT_FALSE(b_took);
    EXPECT_EQ(b_took.error().code, Code::kNoAddressFree) << b_took.error().msg;
}

// Found by review: an address record naming a claim whose own key was deleted alone (an
// operator's etcdctl del of the claim only) made every take of that claim see "created
// meanwhile" and fail with 11 after 16 passes. The claim is now created on that address.
TEST_F(FixedClaimRace, AnAddressRecordWhoseClaimWasDeletedAloneIsAdoptedNotRetriedForever) {
    EtcdClient client(client_config());
    ASSERT_TRUE(client.put(keys::address("/shmipam", "sts", *engine::IpAddress::parse("10.78.0.2")),
                           R"({"claim": "sts:shop/db-0/eth0"})"));
    FixedClaims claims(client, "/shmipam");
    auto took = claims.take("sts", "sts:shop/db-0/eth0", "node-a", 0, only("10.78.0.2"));
    ASSERT_TRUE(took) << took.error().msg;
    EXPECT_EQ(took->address.to_string(), "10.78.0.2");
    auto all = claims.all("sts");
    ASSERT_TRUE(all);
    ASSERT_EQ(all->size(), 1u);
    EXPECT_EQ((*all)[0].node, "node-a");
    // A record naming the claim with a value that is not a string is someone else's: no throw.
    ASSERT_TRUE(client.put(keys::address("/shmipam", "sts", *engine::IpAddress::parse("10.78.0.3")),
                           R"({"claim": 7})"));
    auto other = claims.take("sts", "sts:shop/db-1/eth0", "node-a", 0, only("10.78.0.4"));
    ASSERT_TRUE(other) << other.error().msg;
}

// Found by review: removing a claim (cluster gc, a take replacing an unusable claim) deleted the
// address record of its address unconditionally. When that record had been taken meanwhile by
// another claim (here the record was deleted alone by hand, and another pod's take then made
// it its own), the other pod's address was left without a record, free for a third pod to take.
// The record is now deleted only while it still names the claim removed, at the revision read.
TEST_F(FixedClaimRace, RemovingAClaimNeverDeletesTheAddressRecordAnotherClaimTookMeanwhile) {
    EtcdClient client(client_config());
    FixedClaims claims(client, "/shmipam");
    auto first = claims.take("sts", "sts:shop/db-0/eth0", "node-gone", 0, only("10.78.0.2"));
    ASSERT_TRUE(first) << first.error().msg;
    auto read = claims.all("sts");  // what a gc reads
    ASSERT_TRUE(read);
    ASSERT_EQ(read->size(), 1u);
    const auto record = keys::address("/shmipam", "sts", *engine::IpAddress::parse("10.78.0.2"));
    auto gone = client.txn({}, {{record, std::nullopt}});
    ASSERT_TRUE(gone && *gone);
    auto second = claims.take("sts", "sts:shop/db-1/eth0", "node-b", 0, only("10.78.0.2"));
    ASSERT_TRUE(second) << second.error().msg;
    auto removed = claims.remove("sts", (*read)[0]);
    ASSERT_TRUE(removed) << removed.error().msg;
    EXPECT_TRUE(*removed) << "the claim read is unchanged: removed";
    auto kept = client.get(record);
    ASSERT_TRUE(kept);
    ASSERT_TRUE(*kept) << "db-1's address record was deleted with db-0's claim";
    EXPECT_NE((*kept)->value.find("db-1"), std::string::npos) << (*kept)->value;
    // A record that still names the claim goes with it.
    auto third = claims.all("sts");
    ASSERT_TRUE(third);
    ASSERT_EQ(third->size(), 1u);
    ASSERT_TRUE(*claims.remove("sts", (*third)[0]));
    auto after = client.get(record);
    ASSERT_TRUE(after);
    EXPECT_FALSE(*after);
}

}  // namespace
}  // namespace shmipam::cluster
