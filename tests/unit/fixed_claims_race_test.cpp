// Fixed-address claims (cluster/fixed_claims.h) at the one step where two nodes starting pods at
// once can cross: a second writer's whole take run, over the in-memory store, between the
// first's read of its claim and its listing of the taken addresses (MemoryEtcd::before_call),
// deterministically. tests/cluster/fixed_claims_test.cpp keeps what needs a real etcd.
#include <gtest/gtest.h>

#include "cluster/fixed_claims.h"
#include "cluster/key_schema.h"
#include "tests/support/memory_kv.h"

namespace shmipam::testing {
namespace {

using cluster::FixedClaims;

constexpr const char* kPrefix = "/shmipam";

// The first free address of a pool that holds only `only`.
FixedClaims::Pick only(const char* text) {
    return [a = *engine::IpAddress::parse(text)](const std::set<std::string>& taken) {
        return taken.count(a.to_string()) ? std::nullopt : std::optional(a);
    };
}

// Runs `second` once, when a client of `etcd` first lists the pool's taken addresses.
void before_listing(MemoryEtcd& etcd, const std::string& pool, std::function<void()> second) {
    etcd.before_call = [&etcd, listing = cluster::keys::addresses(kPrefix, pool),
                        second = std::move(second)](const std::string& call,
                                                    const std::string& key) mutable {
        if (call != "get_prefix" || key != listing || !second) return;
        std::exchange(second, nullptr)();
    };
}

// A StatefulSet pod started on two nodes at once. Node b read no claim; node a then created it,
// with the pool's last free address; node b listed the taken addresses, found none left and
// failed the pod with 100 instead of reading the claim again and taking it over.
TEST(FixedClaimRace, AClaimCreatedBetweenTheReadAndTheListingIsTakenOverNotReportedAsPoolFull) {
    MemoryEtcd etcd;
    MemoryKv a_client(etcd), b_client(etcd);
    FixedClaims a(a_client, kPrefix), b(b_client, kPrefix);
    Expected<cluster::FixedClaim> a_took = make_error(Code::kInternal, "node a's take did not run");
    before_listing(etcd, "sts", [&] {
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
TEST(FixedClaimRace, AnotherPodsClaimOnTheLastAddressCreatedMeanwhileLeavesThePoolFull) {
    MemoryEtcd etcd;
    MemoryKv a_client(etcd), b_client(etcd);
    FixedClaims a(a_client, kPrefix), b(b_client, kPrefix);
    before_listing(etcd, "sts", [&] {
        ASSERT_TRUE(a.take("sts", "sts:shop/db-1/eth0", "node-a", 0, only("10.78.0.2")));
    });
    auto b_took = b.take("sts", "sts:shop/db-0/eth0", "node-b", 0, only("10.78.0.2"));
    ASSERT_FALSE(b_took);
    EXPECT_EQ(b_took.error().code, Code::kNoAddressFree) << b_took.error().msg;
}

}  // namespace
}  // namespace shmipam::testing
