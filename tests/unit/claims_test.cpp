// Fixed addresses in the engine (docs/fixed-ips.md): a claim keyed by a name holds the
// addresses, the newest sandbox of the name uses them, and the claim's policy decides when an
// idle claim is freed. Time is the test's (Allocator::use_clock).
#include <gtest/gtest.h>

#include <filesystem>

#include "base/clock.h"
#include "engine/inspect/inspect.h"
#include "tests/support/network_fixture.h"

namespace shmipam::engine {
namespace {

using testing::add_request;
using testing::first_address;

constexpr uint64_t kHour = 3600;

class ClaimsTest : public ::testing::Test {
  protected:
    void SetUp() override {
        testing::write_file(dir.sub("boot_id"), "11111111-2222-3333-4444-555555555555\n");
        cfg = testing::network_config(dir,
                                      {testing::range_set({{"10.70.0.0/28", "", "", ""}}),
                                       testing::range_set({{"fd70::/124", "", "", ""}})},
                                      30'000);
        cfg.boot_id_path = dir.sub("boot_id");
        now = base::unix_ns() / 1'000'000'000;
        open();
    }
    void open() {
        alloc.reset();
        store = testing::open_store(cfg);
        alloc = std::make_unique<Allocator>(*store, cfg);
        alloc->use_clock([this] { return now; });
    }
    void reboot() {
        alloc.reset();
        store.reset();
        std::filesystem::remove_all(cfg.state_dir());
        ++boots;
        testing::write_file(dir.sub("boot_id"),
                            std::to_string(90000000 + boots) + "-2222-3333-4444-555555555555\n");
        open();
    }
    int boots = 0;
    // An ADD of the StatefulSet pod shop/db-0 in sandbox `cid`, kept `keep_idle` (format.h).
    Expected<AddOutcome> add_db0(const std::string& cid,
                                 uint64_t keep_idle = format::kKeepIdleForever) {
        AddRequest r = add_request(cid);
        r.pod = {"shop", "db-0"};
        r.claim = ClaimSpec{"sts:shop/db-0/eth0", keep_idle};
        return alloc->add(r);
    }
    std::vector<std::string> held_by(const std::string& cid) {
        std::vector<std::string> out;
        auto h = alloc->addresses_of({cid, "eth0"});
        if (h) {
            for (const auto& a : *h) out.push_back(a.address.to_string());
        }
        return out;
    }
    std::vector<std::string> all(const Expected<AddOutcome>& out) {
        std::vector<std::string> v;
        EXPECT_TRUE(out) << (out ? "" : out.error().msg);
        if (out) {
            for (const auto& a : out->addresses) v.push_back(a.address.to_string());
        }
        return v;
    }
    std::vector<ClaimView> claims() { return alloc->claims(); }
    size_t allocated() {
        size_t n = 0;
        const auto d = dump(*store);
        for (const auto& s : d->slots) n += s.state == "allocated";
        return n;
    }

    testing::TempDir dir;
    NetworkConfig cfg;
    uint64_t now = 0;
    std::unique_ptr<NetworkStore> store;
    std::unique_ptr<Allocator> alloc;
};

TEST_F(ClaimsTest, ARestartWithANewContainerGetsTheSameAddresses) {
    const auto first = all(add_db0("c1"));
    ASSERT_EQ(first.size(), 2u) << "one claim holds both families";
    ASSERT_TRUE(alloc->del({"c1", "eth0"}));
    const auto again = all(add_db0("c2"));
    EXPECT_EQ(again, first);
    EXPECT_EQ(held_by("c2"), first);
    EXPECT_TRUE(held_by("c1").empty());
    testing::expect_verify_clean(*store);
}

TEST_F(ClaimsTest, ARepeatedAddOfOneSandboxIsIdempotent) {
    const auto first = add_db0("c1");
    const auto again = add_db0("c1");
    ASSERT_TRUE(again);
    EXPECT_TRUE(again->existing);
    EXPECT_EQ(all(again), all(first));
    EXPECT_EQ(allocated(), 2u);
}

TEST_F(ClaimsTest, ScaleDownThenUpKeepsTheAddressFromOtherPods) {
    const auto first = all(add_db0("c1"));
    ASSERT_TRUE(alloc->del({"c1", "eth0"}));
    // Scaled down: other pods come and go, and none gets db-0's addresses.
    for (int i = 0; i < 12; ++i) {
        const auto other = all(alloc->add(add_request("other-" + std::to_string(i))));
        ASSERT_EQ(other.size(), 2u);
        EXPECT_NE(other[0], first[0]);
        EXPECT_NE(other[1], first[1]);
        if (i % 2 == 0) ASSERT_TRUE(alloc->del({"other-" + std::to_string(i), "eth0"}));
    }
    EXPECT_EQ(all(add_db0("c2")), first);
    testing::expect_verify_clean(*store);
}

TEST_F(ClaimsTest, AStaleDelAfterTheNewAddFreesNothing) {
    const auto first = all(add_db0("c1"));
    ASSERT_EQ(all(add_db0("c2")), first) << "the node lost c1 without a DEL";
    ASSERT_TRUE(alloc->del({"c1", "eth0"}));
    EXPECT_EQ(held_by("c2"), first);
    ASSERT_EQ(claims().size(), 1u);
    EXPECT_EQ(claims()[0].use, ClaimView::Use::kInUse);
    EXPECT_EQ(claims()[0].container_id, "c2");
    const auto other = all(alloc->add(add_request("other")));
    EXPECT_NE(other[0], first[0]);
    testing::expect_verify_clean(*store);
}

TEST_F(ClaimsTest, TwoSandboxesAtOnceTheNewerHoldsAndTheOlderCannotTakeItBack) {
    const auto first = all(add_db0("c1"));
    ASSERT_EQ(all(add_db0("c2")), first);
    auto back = add_db0("c1");
    ASSERT_FALSE(back) << "a repeated ADD of the older sandbox";
    EXPECT_EQ(back.error().code, Code::kClaimMoved);
    EXPECT_EQ(alloc->addresses_of({"c1", "eth0"}).error().code, Code::kCheckNoAllocation);
    EXPECT_EQ(held_by("c2"), first);
    ASSERT_TRUE(alloc->del({"c1", "eth0"}));
    EXPECT_EQ(held_by("c2"), first);
    EXPECT_EQ(allocated(), 2u);
    ASSERT_TRUE(alloc->del({"c2", "eth0"}));
    EXPECT_EQ(allocated(), 2u) << "kept for the name";
    EXPECT_EQ(claims().at(0).use, ClaimView::Use::kIdle);
    testing::expect_verify_clean(*store);
}

TEST_F(ClaimsTest, PolicyNeverKeepsAnIdleClaimForever) {
    const auto first = all(add_db0("c1"));
    ASSERT_TRUE(alloc->del({"c1", "eth0"}));
    now += 10'000 * kHour;
    ASSERT_TRUE(alloc->status());
    ASSERT_EQ(*alloc->expire_claims(), 0u);
    ASSERT_TRUE(alloc->gc({}));
    EXPECT_EQ(allocated(), 2u);
    EXPECT_EQ(all(add_db0("c2")), first);
}

TEST_F(ClaimsTest, PolicyZeroFreesTheAddressesAtTheDel) {
    const auto first = all(add_db0("c1", format::kKeepIdleNone));
    ASSERT_TRUE(alloc->del({"c1", "eth0"}));
    EXPECT_EQ(allocated(), 0u);
    EXPECT_TRUE(claims().empty());
    size_t cooling = 0;
    const auto d = dump(*store);
    for (const auto& s : d->slots) cooling += s.state == "cooling";
    EXPECT_EQ(cooling, 2u) << "then cools down like any address";
    testing::expect_verify_clean(*store);
}

TEST_F(ClaimsTest, PolicyZeroKeepsTheAddressesWhileANewerSandboxUsesThem) {
    const auto first = all(add_db0("c1", format::kKeepIdleNone));
    ASSERT_EQ(all(add_db0("c2", format::kKeepIdleNone)), first);
    ASSERT_TRUE(alloc->del({"c1", "eth0"}));
    EXPECT_EQ(held_by("c2"), first);
    ASSERT_TRUE(alloc->del({"c2", "eth0"}));
    EXPECT_EQ(allocated(), 0u);
}

TEST_F(ClaimsTest, PolicyOfTwoHoursIsFreedByTheNextInvocationAfterThem) {
    const uint64_t keep = 2 * kHour + 1;
    const auto first = all(add_db0("c1", keep));
    ASSERT_TRUE(alloc->del({"c1", "eth0"}));
    const uint64_t idle_since = now;
    ASSERT_EQ(claims().size(), 1u);
    EXPECT_EQ(claims()[0].idle_since_unix_s, idle_since);
    EXPECT_EQ(claims()[0].expires_unix_s, idle_since + 2 * kHour);
    now += 2 * kHour - 1;
    ASSERT_TRUE(alloc->add(add_request("x")));
    EXPECT_EQ(claims().size(), 1u) << "one second before its time";
    now += 1;
    EXPECT_EQ(claims().size(), 1u) << "due, but no invocation has met it yet";
    ASSERT_TRUE(alloc->add(add_request("y")));  // the next invocation, any one
    EXPECT_TRUE(claims().empty());
    EXPECT_EQ(allocated(), 4u) << "x's and y's";
    const auto back = all(add_db0("c2", keep));
    EXPECT_NE(back[0], first[0]) << "the old address is cooling down";
    testing::expect_verify_clean(*store);
}

TEST_F(ClaimsTest, AClaimInUseNeverExpires) {
    all(add_db0("c1", 1 + 5));
    now += 1000 * kHour;
    ASSERT_EQ(*alloc->expire_claims(), 0u);
    EXPECT_EQ(allocated(), 2u);
}

TEST_F(ClaimsTest, ADelOfAnotherPodAlsoMeetsADueClaim) {
    all(add_db0("c1", 1 + 60));
    ASSERT_TRUE(alloc->add(add_request("x")));
    ASSERT_TRUE(alloc->del({"c1", "eth0"}));
    now += 61;
    ASSERT_TRUE(alloc->del({"x", "eth0"}));
    EXPECT_TRUE(claims().empty());
}

TEST_F(ClaimsTest, AFullNetworkFreesDueClaimsBeforeAnsweringNoAddress) {
    // 14 usable IPv4 addresses in a /28 (.1 gateway... host-local's rules: .1 to .14).
    all(add_db0("c1", 1 + 60));
    ASSERT_TRUE(alloc->del({"c1", "eth0"}));
    std::vector<std::string> pods;
    for (int i = 0;; ++i) {
        auto out = alloc->add(add_request("p" + std::to_string(i)));
        if (!out) {
            EXPECT_EQ(out.error().code, Code::kNoAddressFree);
            break;
        }
        ASSERT_LT(i, 20);
    }
    now += 61;
    // The claim is due; it goes to COOLING (30 s), so the next ADD still finds none free, but
    // the claim was freed by it.
    (void)alloc->add(add_request("late"));
    EXPECT_TRUE(claims().empty());
}

TEST_F(ClaimsTest, GcReleasesADeadSandboxAndTheClaimGoesIdle) {
    const auto first = all(add_db0("c1", 1 + 60));
    auto out = alloc->gc({});
    ASSERT_TRUE(out);
    EXPECT_EQ(out->released, 1u) << "the sandbox's entry";
    ASSERT_EQ(claims().size(), 1u);
    EXPECT_EQ(claims()[0].use, ClaimView::Use::kIdle);
    EXPECT_EQ(allocated(), 2u);
    now += 61;
    ASSERT_TRUE(alloc->gc({}));
    EXPECT_EQ(allocated(), 0u);
}

TEST_F(ClaimsTest, AnOperatorReleasesAnIdleClaimAndOnlyForcesOneInUse) {
    all(add_db0("c1"));
    const auto by_name = [](const ClaimView& v) { return v.key == "sts:shop/db-0/eth0"; };
    auto refused = alloc->release_claims(by_name, false, false);
    ASSERT_TRUE(refused);
    EXPECT_TRUE(refused->empty()) << "in use by c1";
    EXPECT_EQ(allocated(), 2u);
    ASSERT_TRUE(alloc->del({"c1", "eth0"}));
    auto dry = alloc->release_claims(by_name, false, true);
    ASSERT_EQ(dry->size(), 1u);
    EXPECT_EQ(allocated(), 2u);
    auto done = alloc->release_claims(by_name, false, false);
    ASSERT_EQ(done->size(), 1u);
    EXPECT_EQ(allocated(), 0u);
    testing::expect_verify_clean(*store);
}

TEST_F(ClaimsTest, AReleasedClaimLeavesItsSandboxWithoutAddresses) {
    const auto first = all(add_db0("c1"));
    auto forced = alloc->release_claims([](const ClaimView&) { return true; }, true, false);
    ASSERT_EQ(forced->size(), 1u);
    EXPECT_TRUE(held_by("c1").empty());
    // The sandbox's next ADD (a retry) claims anew.
    const auto again = all(add_db0("c1"));
    EXPECT_EQ(again.size(), 2u);
    testing::expect_verify_clean(*store);
}

TEST_F(ClaimsTest, AfterARebootAClaimIsIdleSinceTheRebuildAndOrdinaryAllocationsAreFreed) {
    const auto first = all(add_db0("c1", 1 + 2 * kHour));
    ASSERT_TRUE(alloc->add(add_request("plain")));
    reboot();
    EXPECT_TRUE(held_by("plain").empty());
    ASSERT_EQ(claims().size(), 1u);
    EXPECT_EQ(claims()[0].use, ClaimView::Use::kIdle);
    EXPECT_EQ(claims()[0].keep_idle, 1 + 2 * kHour) << "the policy survives in the journal";
    EXPECT_EQ(all(add_db0("c2", 1 + 2 * kHour)), first);
    testing::expect_verify_clean(*store);
    ASSERT_TRUE(alloc->del({"c2", "eth0"}));
    reboot();
    now += 2 * kHour + 10;
    ASSERT_TRUE(alloc->status());
    EXPECT_TRUE(claims().empty()) << "idle since the rebuild, due two hours later";
}

TEST_F(ClaimsTest, ARebuildInTheSameBootKeepsAClaimForItsUnknownSandbox) {
    const auto first = all(add_db0("c1", format::kKeepIdleNone));
    alloc.reset();
    store.reset();
    std::filesystem::remove_all(cfg.state_dir());
    open();
    ASSERT_EQ(claims().size(), 1u);
    EXPECT_EQ(claims()[0].use, ClaimView::Use::kUnknownSandbox);
    now += 1000 * kHour;
    ASSERT_EQ(*alloc->expire_claims(), 0u) << "c1 may still be running";
    EXPECT_EQ(all(add_db0("c1", format::kKeepIdleNone)), first) << "its retried ADD binds it";
    ASSERT_TRUE(alloc->del({"c1", "eth0"}));
    EXPECT_EQ(allocated(), 0u);
}

// Guards against: after a reboot a pod's new sandbox bound its claim without writing anything,
// so a rebuild later in the same boot read only the claim's records of the old boot, took the
// claim for idle since then, and its policy freed the address under the running pod. Binding a
// claim of an earlier boot now writes its records again with this boot's id.
TEST_F(ClaimsTest, ARebuildAfterARebootAndABindKeepsTheClaimInUse) {
    const auto first = all(add_db0("c1", format::kKeepIdleNone));
    reboot();
    EXPECT_EQ(all(add_db0("c2", format::kKeepIdleNone)), first);
    // The same boot: the run directory lost (or the index retired) and rebuilt.
    alloc.reset();
    store.reset();
    std::filesystem::remove_all(cfg.state_dir());
    open();
    ASSERT_EQ(claims().size(), 1u);
    EXPECT_EQ(claims()[0].use, ClaimView::Use::kUnknownSandbox) << "c2 may be running";
    now += 1000;
    ASSERT_EQ(*alloc->expire_claims(), 0u);
    EXPECT_EQ(allocated(), 1u + 1u);
    testing::expect_verify_clean(*store);
}

// Guards against: a sandbox that used a fixed address, added again by a runtime whose config
// no longer asks for one, was answered success with no address at all.
TEST_F(ClaimsTest, ARepeatedAddWithoutTheStickyAskAnswersTheClaimsAddresses) {
    const auto first = all(add_db0("c1"));
    EXPECT_EQ(all(alloc->add(add_request("c1"))), first);
    ASSERT_EQ(all(add_db0("c2")), first);
    auto older = alloc->add(add_request("c1"));
    ASSERT_FALSE(older);
    EXPECT_EQ(older.error().code, Code::kClaimMoved);
}

// The claim key of a long namespace and pod name does not fit the entry's display field; the
// claim is found by its fingerprint all the same.
TEST_F(ClaimsTest, AClaimWithAKeyLongerThanItsDisplayFieldIsReleasedByKey) {
    const std::string ns(60, 'n'), pod(60, 'p');
    AddRequest r = add_request("c1");
    r.claim = ClaimSpec{"sts:" + ns + "/" + pod + "/eth0"};
    ASSERT_TRUE(alloc->add(r));
    ASSERT_TRUE(alloc->del({"c1", "eth0"}));
    auto released = alloc->release_claim(r.claim->key, "eth0", false);
    ASSERT_TRUE(released);
    EXPECT_EQ(*released, 1u);
    EXPECT_EQ(allocated(), 0u);
}

}  // namespace
}  // namespace shmipam::engine
