// Races of fixed addresses (docs/fixed-ips.md), one interleaving each, driven deterministically:
// the first actor's operation runs to a claim step, where the second actor's whole operation
// happens (faults::set_actor), then the first goes on. Afterwards the name holds one claim, bound
// to the newest sandbox, no address is held twice, and verify is clean.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "base/clock.h"
#include "base/fault_point.h"
#include "tests/support/at_point.h"
#include "tests/support/network_fixture.h"

namespace shmipam::engine {
namespace {

using testing::AtPoint;

class ClaimRace : public ::testing::Test {
  protected:
    void SetUp() override {
        cfg = testing::network_config(dir, {testing::range_set({{"10.72.0.0/24", "", "", ""}})});
        store = testing::open_store(cfg);
        first = std::make_unique<Allocator>(*store, cfg);
        second = std::make_unique<Allocator>(*store, cfg);
        t0 = base::unix_ns() / 1'000'000'000;
        first->use_clock([this] { return first_now; });
        second->use_clock([this] { return second_now; });
        first_now = second_now = t0;
    }
    AddRequest db0(const std::string& cid, uint64_t keep_idle) {
        AddRequest r = testing::add_request(cid);
        r.pod = {"shop", "db-0"};
        r.claim = ClaimSpec{"sts:shop/db-0/eth0", keep_idle};
        return r;
    }
    std::optional<std::string> held(const std::string& cid) {
        auto got = Allocator(*store, cfg).addresses_of({cid, "eth0"});
        if (!got || got->empty()) return std::nullopt;
        return got->at(0).address.to_string();
    }
    // One claim, bound to `cid`, which holds `address`.
    void expect_one_claim_held_by(const std::string& cid) {
        auto claims = Allocator(*store, cfg).claims();
        ASSERT_EQ(claims.size(), 1u);
        EXPECT_EQ(claims[0].use, ClaimView::Use::kInUse);
        EXPECT_EQ(claims[0].container_id, cid);
        ASSERT_TRUE(held(cid));
        EXPECT_EQ(*held(cid), claims[0].addresses.at(0).to_string());
        testing::expect_verify_clean(*store);
    }

    testing::TempDir dir;
    NetworkConfig cfg;
    std::unique_ptr<NetworkStore> store;
    std::unique_ptr<Allocator> first, second;
    uint64_t t0 = 0, first_now = 0, second_now = 0;
};

// The claim came due (5 s idle) just as the pod's new sandbox was binding it: the expiry marks
// it before the bind's CAS, so the bind fails, and the ADD claims anew instead of answering an
// address that is being freed under it.
TEST_F(ClaimRace, AnExpiryAtTheBindOfARestartNeverLeavesTheSandboxWithAFreedAddress) {
    ASSERT_TRUE(first->add(db0("c1", 1 + 5)));
    ASSERT_TRUE(first->del({"c1", "eth0"}));
    first_now = t0 + 4;   // not due for the ADD
    second_now = t0 + 6;  // due for the expiry
    Expected<AddOutcome> c2 = make_error(Code::kInternal, "not run");
    {
        AtPoint at("claim.before_bind", [&] { EXPECT_EQ(*second->expire_claims(), 1u); });
        c2 = first->add(db0("c2", 1 + 5));
        ASSERT_TRUE(at.reached());
    }
    ASSERT_TRUE(c2) << c2.error().msg;
    expect_one_claim_held_by("c2");
}

// The older sandbox's DEL came between the newer sandbox's commit and its bind: with a claim kept
// while idle, the newer binds it and holds the same address.
TEST_F(ClaimRace, AStaleDelAtTheBindOfTheNewerSandboxFreesNothing) {
    auto c1 = first->add(db0("c1", format::kKeepIdleForever));
    ASSERT_TRUE(c1);
    Expected<AddOutcome> c2 = make_error(Code::kInternal, "not run");
    {
        AtPoint at("claim.before_bind", [&] { ASSERT_TRUE(second->del({"c1", "eth0"})); });
        c2 = first->add(db0("c2", format::kKeepIdleForever));
        ASSERT_TRUE(at.reached());
    }
    ASSERT_TRUE(c2) << c2.error().msg;
    EXPECT_EQ(c2->addresses[0].address, c1->addresses[0].address);
    expect_one_claim_held_by("c2");
}

// The same with policy 0: the older sandbox's DEL freed the claim before the newer bound it. The
// newer must not answer the freed address: it claims anew.
TEST_F(ClaimRace, APolicyZeroDelAtTheBindOfTheNewerSandboxNeverHandsItAFreedAddress) {
    ASSERT_TRUE(first->add(db0("c1", format::kKeepIdleNone)));
    Expected<AddOutcome> c2 = make_error(Code::kInternal, "not run");
    {
        AtPoint at("claim.before_bind", [&] { ASSERT_TRUE(second->del({"c1", "eth0"})); });
        c2 = first->add(db0("c2", format::kKeepIdleNone));
        ASSERT_TRUE(at.reached());
    }
    ASSERT_TRUE(c2) << c2.error().msg;
    expect_one_claim_held_by("c2");
}

// The older sandbox's DEL (policy 0) has unbound the claim and marked it expiring when the pod's
// new sandbox is added: the ADD completes the release and claims anew; the DEL, going on, finds
// its claim already released and never touches the new one.
TEST_F(ClaimRace, ANewSandboxDuringAPolicyZeroDelGetsAClaimTheDelNeverFrees) {
    ASSERT_TRUE(first->add(db0("c1", format::kKeepIdleNone)));
    Expected<AddOutcome> c2 = make_error(Code::kInternal, "not run");
    {
        AtPoint at("claim.after_unbind",
                   [&] { c2 = second->add(db0("c2", format::kKeepIdleNone)); });
        ASSERT_TRUE(first->del({"c1", "eth0"}));
        ASSERT_TRUE(at.reached());
    }
    ASSERT_TRUE(c2) << c2.error().msg;
    expect_one_claim_held_by("c2");
}

// Two sandboxes of a name never seen before are added at once: the newer (c2, added while c1 was
// between its commit and its bind) holds the claim; c1's ADD is refused with 123 and leaves
// nothing behind.
TEST_F(ClaimRace, TwoFirstSandboxesAtOnceTheNewerHoldsTheClaim) {
    Expected<AddOutcome> c1 = make_error(Code::kInternal, "not run");
    Expected<AddOutcome> c2 = make_error(Code::kInternal, "not run");
    {
        AtPoint at("claim.after_sandbox_commit",
                   [&] { c2 = second->add(db0("c2", format::kKeepIdleForever)); });
        c1 = first->add(db0("c1", format::kKeepIdleForever));
        ASSERT_TRUE(at.reached());
    }
    ASSERT_TRUE(c2) << c2.error().msg;
    ASSERT_FALSE(c1);
    EXPECT_EQ(c1.error().code, Code::kClaimMoved) << c1.error().msg;
    EXPECT_FALSE(held("c1"));
    expect_one_claim_held_by("c2");
}

// Guards against: an operator's release (not forced) saw the claim idle; the pod's new sandbox
// bound it; the release then marked and freed it anyway, under the running pod. The release now
// marks only from the word it saw.
TEST_F(ClaimRace, AnOperatorsReleaseNeverFreesAClaimBoundSinceItLooked) {
    ASSERT_TRUE(first->add(db0("c1", format::kKeepIdleForever)));
    ASSERT_TRUE(first->del({"c1", "eth0"}));
    Expected<std::vector<ClaimView>> released = make_error(Code::kInternal, "not run");
    {
        AtPoint at("claim.before_mark",
                   [&] { ASSERT_TRUE(second->add(db0("c2", format::kKeepIdleForever))); });
        released = first->release_claims([](const ClaimView&) { return true; }, false, false);
        ASSERT_TRUE(at.reached());
    }
    ASSERT_TRUE(released);
    EXPECT_TRUE(released->empty());
    expect_one_claim_held_by("c2");
}

// Guards against: the runtime's DEL of a sandbox (after its ADD timed out) came between the
// sandbox's commit and its bind: the DEL had nothing to unbind and ended the sandbox, and the bind
// then bound the claim to the ended sandbox, where no policy would ever free it. The bind now
// checks its sandbox before and after its CAS, and the DEL tries to unbind after its release too.
class ClaimRaceDelAtBind : public ClaimRace, public ::testing::WithParamInterface<const char*> {};

TEST_P(ClaimRaceDelAtBind, ADelOfTheSandboxAtItsBindLeavesTheClaimIdleNotBoundToNothing) {
    Expected<AddOutcome> c1 = make_error(Code::kInternal, "not run");
    {
        AtPoint at(GetParam(), [&] { ASSERT_TRUE(second->del({"c1", "eth0"})); });
        c1 = first->add(db0("c1", 1 + 60));
        ASSERT_TRUE(at.reached());
    }
    ASSERT_FALSE(c1) << "its DEL came first";
    EXPECT_EQ(c1.error().code, Code::kTryAgainLater) << c1.error().msg;
    EXPECT_FALSE(held("c1"));
    auto claims = Allocator(*store, cfg).claims();
    ASSERT_EQ(claims.size(), 1u);
    EXPECT_EQ(claims[0].use, ClaimView::Use::kIdle);
    testing::expect_verify_clean(*store);
    first_now = t0 + 61;
    EXPECT_EQ(*first->expire_claims(), 1u) << "its policy frees it";
}

INSTANTIATE_TEST_SUITE_P(BeforeTheBind, ClaimRaceDelAtBind,
                         ::testing::Values("claim.after_sandbox_commit", "claim.before_bind"),
                         [](const auto& info) {
                             std::string n = info.param;
                             for (char& c : n) {
                                 if (c == '.') c = '_';
                             }
                             return n;
                         });

}  // namespace
}  // namespace shmipam::engine
