#include "engine/ops/allocator.h"

#include <gtest/gtest.h>

#include <set>

#include "engine/inspect/inspect.h"
#include "engine/ops/open_network.h"
#include "shm/atomic_word.h"
#include "tests/support/network_fixture.h"

namespace shmipam::engine {
namespace {

using testing::add_request;
using testing::first_address;
using testing::range_set;

class AllocatorTest : public ::testing::Test {
  protected:
    void open(std::vector<RangeSet> sets, uint64_t delay_ms = 0) {
        cfg = testing::network_config(dir, std::move(sets), delay_ms);
        store = testing::open_store(cfg);
        alloc = std::make_unique<Allocator>(*store, cfg);
    }
    size_t in_use() {
        auto d = dump(*store);
        size_t n = 0;
        for (const auto& s : d->slots) n += s.state == "allocated";
        return n;
    }

    testing::TempDir dir;
    NetworkConfig cfg;
    std::unique_ptr<NetworkStore> store;
    std::unique_ptr<Allocator> alloc;
};

TEST_F(AllocatorTest, FreshNetworkHandsOutAddressesInHostLocalOrder) {
    open({range_set({{"10.1.0.0/24", "", "", ""}})});
    EXPECT_EQ(first_address(alloc->add(add_request("a"))), "10.1.0.2");  // .1 is the gateway
    EXPECT_EQ(first_address(alloc->add(add_request("b"))), "10.1.0.3");
    EXPECT_EQ(first_address(alloc->add(add_request("c"))), "10.1.0.4");
    testing::expect_verify_clean(*store);
}

TEST_F(AllocatorTest, RepeatedAddReturnsTheHeldAddress) {
    open({range_set({{"10.1.0.0/24", "", "", ""}})});
    auto first = alloc->add(add_request("a"));
    auto again = alloc->add(add_request("a"));
    ASSERT_TRUE(again);
    EXPECT_TRUE(again->existing);
    EXPECT_EQ(first_address(first), first_address(again));
    // Another interface of the same container is another attachment.
    EXPECT_EQ(first_address(alloc->add(add_request("a", "net1"))), "10.1.0.3");
    EXPECT_EQ(in_use(), 2u);
}

TEST_F(AllocatorTest, DelReleasesAndIsIdempotent) {
    open({range_set({{"10.1.0.0/24", "", "", ""}})});
    ASSERT_TRUE(alloc->add(add_request("a")));
    EXPECT_TRUE(alloc->del({"a", "eth0"}));
    EXPECT_EQ(in_use(), 0u);
    EXPECT_TRUE(alloc->del({"a", "eth0"}));
    EXPECT_TRUE(alloc->del({"never-added", "eth0"}));
    EXPECT_EQ(alloc->addresses_of({"a", "eth0"}).error().code, Code::kCheckNoAllocation);
    testing::expect_verify_clean(*store);
}

TEST_F(AllocatorTest, CoolingAddressIsSkippedWhileOthersAreFree) {
    open({range_set({{"10.1.0.0/24", "", "", ""}})}, 30'000);
    ASSERT_EQ(first_address(alloc->add(add_request("a"))), "10.1.0.2");
    ASSERT_TRUE(alloc->del({"a", "eth0"}));
    // Wrap the cursor back to the start: the next search begins at .2, which is cooling.
    shm::store_word(store->index().header().cursor[0], 0);
    EXPECT_EQ(first_address(alloc->add(add_request("b"))), "10.1.0.3");
}

TEST_F(AllocatorTest, WithoutCooldownTheCursorStillRoundRobins) {
    open({range_set({{"10.1.0.0/24", "10.1.0.2", "10.1.0.4", ""}})}, 0);
    EXPECT_EQ(first_address(alloc->add(add_request("a"))), "10.1.0.2");
    ASSERT_TRUE(alloc->del({"a", "eth0"}));
    EXPECT_EQ(first_address(alloc->add(add_request("b"))), "10.1.0.3");
    EXPECT_EQ(first_address(alloc->add(add_request("c"))), "10.1.0.4");
    EXPECT_EQ(first_address(alloc->add(add_request("d"))), "10.1.0.2");  // wrapped around
}

TEST_F(AllocatorTest, WhenOnlyCoolingAddressesRemainTheOldestReleaseIsTaken) {
    // /29: .2 .. .6 usable (.1 gateway, .7 broadcast).
    open({range_set({{"10.1.0.0/29", "", "", ""}})}, 3'600'000);
    for (const char* c : {"a", "b", "c", "d", "e"}) ASSERT_TRUE(alloc->add(add_request(c)));
    ASSERT_TRUE(alloc->del({"c", "eth0"}));  // .4 released first
    ASSERT_TRUE(alloc->del({"a", "eth0"}));  // .2 released second
    EXPECT_EQ(first_address(alloc->add(add_request("f"))), "10.1.0.4");
    EXPECT_EQ(first_address(alloc->add(add_request("g"))), "10.1.0.2");
    auto none = alloc->add(add_request("h"));
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error().code, Code::kNoAddressFree);
}

TEST_F(AllocatorTest, ExhaustionGivesExactlyTheUsableAddressesThenTheDocumentedError) {
    open({range_set({{"10.1.0.0/24", "", "", ""}})});
    std::set<std::string> seen;
    for (int i = 0; i < 253; ++i) {
        auto out = alloc->add(add_request("c" + std::to_string(i)));
        ASSERT_TRUE(out) << i << ": " << out.error().msg;
        EXPECT_TRUE(seen.insert(out->addresses[0].address.to_string()).second);
    }
    EXPECT_EQ(seen.count("10.1.0.1"), 0u);
    EXPECT_EQ(seen.count("10.1.0.0"), 0u);
    EXPECT_EQ(seen.count("10.1.0.255"), 0u);
    auto full = alloc->add(add_request("one-too-many"));
    ASSERT_FALSE(full);
    EXPECT_EQ(full.error().code, Code::kNoAddressFree);
    EXPECT_EQ(alloc->status().error().code, Code::kUnavailable);
    testing::expect_verify_clean(*store);
    ASSERT_TRUE(alloc->del({"c7", "eth0"}));
    EXPECT_TRUE(alloc->status());
}

TEST_F(AllocatorTest, AStaleHintNeverLosesAnAddress) {
    open({range_set({{"10.1.0.0/24", "10.1.0.2", "10.1.0.9", ""}})});
    ASSERT_TRUE(alloc->add(add_request("a")));
    auto* b = *store->block_for(*IpAddress::parse("10.1.0.2"), false);
    for (uint64_t w = 0; w < 4; ++w) b->bitmap()[w] = ~uint64_t{0};  // every hint says busy
    EXPECT_EQ(first_address(alloc->add(add_request("b"))), "10.1.0.3");
}

TEST_F(AllocatorTest, RequestedAddresses) {
    open({range_set({{"10.1.0.0/24", "", "", ""}})}, 3'600'000);
    EXPECT_EQ(first_address(alloc->add(add_request("a", "eth0", {"10.1.0.50"}))), "10.1.0.50");
    auto taken = alloc->add(add_request("b", "eth0", {"10.1.0.50"}));
    ASSERT_FALSE(taken);
    EXPECT_EQ(taken.error().code, Code::kRequestedAddressTaken);
    EXPECT_EQ(alloc->add(add_request("b", "eth0", {"10.2.0.5"})).error().code,
              Code::kRequestedAddressInvalid);
    EXPECT_EQ(alloc->add(add_request("b", "eth0", {"10.1.0.1"})).error().code,
              Code::kRequestedAddressInvalid);
    EXPECT_EQ(alloc->add(add_request("b", "eth0", {"10.1.0.7", "10.1.0.8"})).error().code,
              Code::kRequestedAddressInvalid);
    // An explicit request bypasses the cool-down.
    ASSERT_TRUE(alloc->del({"a", "eth0"}));
    EXPECT_EQ(first_address(alloc->add(add_request("b", "eth0", {"10.1.0.50"}))), "10.1.0.50");
    // Failed requests leave nothing behind.
    EXPECT_EQ(in_use(), 1u);
    testing::expect_verify_clean(*store);
}

TEST_F(AllocatorTest, DualStackGetsOneAddressPerSetAndRollsBackTogether) {
    open({range_set({{"10.1.0.0/24", "", "", ""}}), range_set({{"fd00::/126", "", "", ""}})});
    auto a = alloc->add(add_request("a"));
    ASSERT_TRUE(a);
    ASSERT_EQ(a->addresses.size(), 2u);
    EXPECT_EQ(a->addresses[0].address.to_string(), "10.1.0.2");
    EXPECT_EQ(a->addresses[1].address.to_string(), "fd00::2");
    ASSERT_TRUE(alloc->add(add_request("b")));  // fd00::3 is the last IPv6 one
    auto c = alloc->add(add_request("c"));
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().code, Code::kNoAddressFree);
    EXPECT_EQ(in_use(), 4u) << "the IPv4 address claimed for c must have been rolled back";
    testing::expect_verify_clean(*store);
    ASSERT_TRUE(alloc->del({"a", "eth0"}));
    EXPECT_EQ(in_use(), 2u);
}

TEST_F(AllocatorTest, RangesSpanningSeveralBlocks) {
    open({range_set({{"10.2.0.0/22", "", "", ""}})});
    std::set<std::string> seen;
    for (int i = 0; i < 600; ++i) {
        auto out = alloc->add(add_request("c" + std::to_string(i)));
        ASSERT_TRUE(out) << out.error().msg;
        seen.insert(first_address(out));
    }
    EXPECT_EQ(seen.size(), 600u);
    EXPECT_EQ(seen.count("10.2.1.0"), 1u) << "only the subnet's network address is excluded";
    auto blocks = store->all_blocks();
    ASSERT_TRUE(blocks);
    EXPECT_EQ(blocks->size(), 3u);
    testing::expect_verify_clean(*store);
}

TEST_F(AllocatorTest, GcReleasesEverythingNotValid) {
    open({range_set({{"10.1.0.0/24", "", "", ""}})});
    for (const char* c : {"a", "b", "c"}) ASSERT_TRUE(alloc->add(add_request(c)));
    auto out = alloc->gc({{"b", "eth0"}});
    ASSERT_TRUE(out);
    EXPECT_EQ(out->released, 2u);
    EXPECT_TRUE(alloc->addresses_of({"b", "eth0"}));
    EXPECT_FALSE(alloc->addresses_of({"a", "eth0"}));
    EXPECT_EQ(in_use(), 1u);
}

// A claim is held for a name (a StatefulSet pod's), which no runtime lists among its sandboxes:
// GC, which releases what the runtime no longer has, must leave it alone.
TEST_F(AllocatorTest, GcNeverReleasesAClaim) {
    open({range_set({{"10.1.0.0/24", "", "", ""}})});
    engine::AddRequest claim = add_request("c1", "eth0");
    claim.claim = engine::ClaimSpec{"sts:shop/db-0/eth0"};
    ASSERT_TRUE(alloc->add(claim));
    ASSERT_TRUE(alloc->add(add_request("a")));
    auto out = alloc->gc({});
    ASSERT_TRUE(out);
    EXPECT_EQ(out->released, 2u) << "the sandboxes' entries: a's, and c1's, which held nothing";
    auto kept = alloc->addresses_of({"sts:shop/db-0/eth0", "eth0"});
    ASSERT_TRUE(kept);
    EXPECT_EQ(kept->at(0).address.to_string(), "10.1.0.2");
    EXPECT_EQ(in_use(), 1u);
}

TEST_F(AllocatorTest, StateOutlivesTheProcessMapping) {
    open({range_set({{"10.1.0.0/24", "", "", ""}})});
    ASSERT_TRUE(alloc->add(add_request("a")));
    alloc.reset();
    store.reset();
    store = testing::open_store(cfg);
    alloc = std::make_unique<Allocator>(*store, cfg);
    EXPECT_EQ(alloc->addresses_of({"a", "eth0"})->at(0).address.to_string(), "10.1.0.2");
    EXPECT_EQ(first_address(alloc->add(add_request("b"))), "10.1.0.3");
}

TEST_F(AllocatorTest, BlockSizeIsFixedAtCreation) {
    open({range_set({{"10.1.0.0/24", "", "", ""}})});
    NetworkConfig other = cfg;
    other.block_prefix_v4 = 26;
    auto s = open_network(other, shm::current_process());
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().code, Code::kInvalidConfig);
}

TEST_F(AllocatorTest, AnArenaBelongsToOneDataDir) {
    open({range_set({{"10.1.0.0/24", "", "", ""}})});
    NetworkConfig other = cfg;
    other.data_dir = dir.sub("elsewhere");
    auto s = open_network(other, shm::current_process());
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().code, Code::kArenaForeign);
}

}  // namespace
}  // namespace shmipam::engine
