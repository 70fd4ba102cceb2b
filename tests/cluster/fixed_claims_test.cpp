// Fixed-address claims against a real 3-member etcd (cluster/fixed_claims.h): a claim whose
// address record was left alone by hand, and a removal racing another claim's take. The
// two-writer interleavings at the step where two nodes starting the same pod can cross are
// tests/unit/fixed_claims_race_test.cpp's, over the in-memory store.
#include "cluster/fixed_claims.h"

#include <gtest/gtest.h>

#include "cluster/key_schema.h"
#include "tests/support/three_etcd_members.h"

namespace shmipam::cluster {
namespace {

class FixedClaimRace : public testing::ThreeEtcdMembers {};

// The first free address of a pool that holds only `only`.
FixedClaims::Pick only(const char* text) {
    return [a = *engine::IpAddress::parse(text)](const std::set<std::string>& taken) {
        return taken.count(a.to_string()) ? std::nullopt : std::optional(a);
    };
}

// Guards against: an address record naming a claim whose own key was deleted alone (an
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

// Guards against: removing a claim (cluster gc, a take replacing an unusable claim) deleted the
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
