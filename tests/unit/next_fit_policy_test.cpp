// The next-fit policy driven by a fake slot scanner: no arena, no files. The policy decides the
// order and which candidate to take; the fake says what each address is, and can lose a claim
// to a racer, as host-local's allocator is tested against its FakeStore.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "engine/policy/next_fit.h"
#include "tests/support/network_fixture.h"

namespace shmipam::engine {
namespace {

using format::SlotState;

class FakeScanner final : public SlotScanner {
  public:
    struct Slot {
        SlotState state = SlotState::kFree;
        uint64_t released_boot_ns = 0;
    };
    std::map<std::string, Slot> slots;  // by address text; absent: FREE
    std::set<std::string> lose_once;    // a racer takes these at our first try
    std::vector<std::string> offered;   // every candidate offered, in order

    Slot& at(const std::string& a) { return slots[a]; }

    Expected<ScanResult> scan(const RangeSet& set, size_t r, u128 lo, u128 hi, ScanPass,
                              CandidateVisitor visit) override {
        for (u128 off = lo; off <= hi; ++off) {
            const IpAddress a{set[r].start.value + off, set[r].family()};
            if (excluded_in_set(set, a)) continue;
            Candidate c = candidate(a);
            c.range = r;
            if (c.state != SlotState::kFree && c.state != SlotState::kCooling) continue;
            offered.push_back(a.to_string());
            if (visit(c)) return ScanResult{true, 0};
        }
        return ScanResult{false, 0};
    }
    Expected<Candidate> look(const IpAddress& a) override { return candidate(a); }
    bool heal(const Candidate&) override { return false; }
    bool try_claim(const Candidate& c, uint64_t* claimed_word) override {
        const std::string a = c.address.to_string();
        if (lose_once.erase(a) > 0) {
            at(a).state = SlotState::kAllocated;  // the racer got it
            return false;
        }
        if (at(a).state != c.state) return false;
        at(a).state = SlotState::kClaiming;
        *claimed_word = 1;
        return true;
    }

  private:
    Candidate candidate(const IpAddress& a) {
        const Slot& s = slots[a.to_string()];
        Candidate c;
        c.address = a;
        c.state = s.state;
        c.released_boot_ns = s.released_boot_ns;
        return c;
    }
};

class NextFitPolicy : public ::testing::Test {
  protected:
    // 10.1.0.0/29: .1 is the gateway, .7 the broadcast: .2 - .6 are handed out.
    RangeSet set = testing::range_set({{"10.1.0.0/29", "", "", ""}});
    FakeScanner scanner;
    uint64_t cursors[kMaxRangeSets] = {};
    static constexpr uint64_t kNow = 1'000'000'000'000;
    static constexpr uint64_t kDelay = 30'000'000'000;  // 30 s
    ClaimContext ctx{scanner, cursors, kDelay, kNow, [](const IpAddress&) {}};

    std::string next() {
        auto got = claim_next(ctx, set, 0);
        return got ? got->address.to_string() : "error " + std::to_string(int(got.error().code));
    }
};

TEST_F(NextFitPolicy, TakesAddressesInOrderFromTheCursorAndWrapsAround) {
    EXPECT_EQ(next(), "10.1.0.2");
    EXPECT_EQ(next(), "10.1.0.3");
    scanner.at("10.1.0.4").state = SlotState::kAllocated;
    EXPECT_EQ(next(), "10.1.0.5");
    EXPECT_EQ(next(), "10.1.0.6");
    scanner.at("10.1.0.3").state = SlotState::kFree;  // released long ago (no cool-down left)
    EXPECT_EQ(next(), "10.1.0.3") << "after the end of the range, from its start again";
}

TEST_F(NextFitPolicy, SkipsAddressesStillCoolingDown) {
    scanner.at("10.1.0.2") = {SlotState::kCooling, kNow - 1'000'000'000};  // 1 s ago
    scanner.at("10.1.0.3") = {SlotState::kCooling, kNow - kDelay};         // cooled down
    EXPECT_EQ(next(), "10.1.0.3");
}

TEST_F(NextFitPolicy, WhenOnlyCoolingAddressesAreLeftTakesTheOneReleasedLongestAgo) {
    for (int i = 2; i <= 6; ++i) {
        scanner.at("10.1.0." + std::to_string(i)) = {SlotState::kCooling,
                                                     kNow - uint64_t(i % 5 + 1) * 1'000'000'000};
    }
    EXPECT_EQ(next(), "10.1.0.4") << "released 5 s ago, the longest of the five";
}

TEST_F(NextFitPolicy, AClaimLostToARacerLooksAgainAndTakesTheNextAddress) {
    scanner.lose_once = {"10.1.0.2"};
    EXPECT_EQ(next(), "10.1.0.3");
    EXPECT_EQ(scanner.at("10.1.0.2").state, SlotState::kAllocated);
}

TEST_F(NextFitPolicy, NothingClaimableIsNoAddressFreeAfterTheExhaustivePass) {
    for (int i = 2; i <= 6; ++i)
        scanner.at("10.1.0." + std::to_string(i)).state = SlotState::kAllocated;
    EXPECT_EQ(next(), "error " + std::to_string(int(Code::kNoAddressFree)));
}

TEST_F(NextFitPolicy, NeverOffersTheNetworkTheGatewayOrTheBroadcastAddress) {
    for (int i = 0; i < 5; ++i) next();
    for (const auto& a : scanner.offered) {
        EXPECT_NE(a, "10.1.0.0");
        EXPECT_NE(a, "10.1.0.1");
        EXPECT_NE(a, "10.1.0.7");
    }
}

TEST_F(NextFitPolicy, ARequestedAddressBypassesTheCoolDownButNotAnOwner) {
    scanner.at("10.1.0.5") = {SlotState::kCooling, kNow};
    auto got = claim_requested(ctx, set, *IpAddress::parse("10.1.0.5"));
    ASSERT_TRUE(got);
    EXPECT_EQ(got->address.to_string(), "10.1.0.5");
    scanner.at("10.1.0.6").state = SlotState::kAllocated;
    auto taken = claim_requested(ctx, set, *IpAddress::parse("10.1.0.6"));
    ASSERT_FALSE(taken);
    EXPECT_EQ(taken.error().code, Code::kRequestedAddressTaken);
    scanner.at("10.1.0.4").state = SlotState::kClaiming;  // a live claimer, not healed
    auto busy = claim_requested(ctx, set, *IpAddress::parse("10.1.0.4"));
    ASSERT_FALSE(busy);
    EXPECT_EQ(busy.error().code, Code::kTryAgainLater);
}

}  // namespace
}  // namespace shmipam::engine
