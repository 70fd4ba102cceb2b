// Pool mode's ADD and DEL in process (ipam/pool_add.cpp, ipam/pool_release.cpp) against a fake
// block source: no etcd, no exec, as host-local tests its allocator against a fake store. The
// source hands the node blocks of a pool, and lets a test act between an ADD's steps (a
// concurrent ADD filling the block just claimed, a block given back while the ADD chose it).
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "engine/ops/allocator.h"
#include "engine/ops/open_network.h"
#include "ipam/address_source.h"
#include "ipam/pool_mode.h"
#include "ipam/pool_state.h"
#include "pools/pool_dir.h"
#include "tests/support/temp_dir.h"

namespace shmipam::ipam {
namespace {

using engine::Cidr;
using engine::IpAddress;

Cidr cidr(const char* text) {
    return *Cidr::parse(text);
}

// Blocks of /28 the node owns per pool, and the cluster's free ones it may claim, in order.
class FakeBlockSource final : public AddressSource {
  public:
    std::map<std::string, std::vector<Cidr>> owned;
    std::map<std::string, std::vector<Cidr>> free_blocks;
    int rounds = 4;
    // Run once a block was claimed for an ADD (before it looks again).
    std::function<void(const Cidr& claimed)> after_claim;
    // Run once an ADD took an address, before it asks still_serves.
    std::function<void()> after_take;
    int claims = 0, given_back_checks = 0;
    std::set<std::string> waits;  // pools whose make_room answers 11: room is coming
    std::vector<IpAddress> released;

    bool fixed_across_nodes(const std::string&) const override { return false; }
    bool keeps_default_claims(const std::string&) const override { return false; }
    void prepare(const PoolTarget&) override {}
    Expected<std::vector<pools::IpSet>> places(const PoolTarget& t, bool) override {
        pools::IpSet mine(t.usable.family());
        for (const Cidr& b : owned[t.pool]) {
            const pools::IpSet in_block = t.usable.intersect(b);
            for (const auto& i : in_block.intervals()) mine.add(i.first, i.last);
        }
        return std::vector<pools::IpSet>{mine};
    }
    bool still_serves(const std::string& pool,
                      const std::vector<engine::AllocatedAddress>& addresses) override {
        ++given_back_checks;
        if (after_take) std::exchange(after_take, nullptr)();
        for (const auto& a : addresses) {
            bool in = false;
            for (const Cidr& b : owned[pool]) in = in || b.contains(a.address);
            if (!in) return false;
        }
        return true;
    }
    void after_allocation(const PoolTarget&, const std::vector<pools::IpSet>&,
                          engine::NetworkStore&) override {}
    Expected<bool> make_room(const PoolTarget& t, const std::optional<IpAddress>&,
                             std::string* why) override {
        if (waits.count(t.pool) != 0) {
            return make_error(Code::kTryAgainLater, "node x gives a block of " + t.pool + " back");
        }
        auto& pool_free = free_blocks[t.pool];
        if (pool_free.empty()) {
            *why = "no block of " + t.pool + " is left in the fake cluster";
            return false;
        }
        ++claims;
        const Cidr b = pool_free.front();
        pool_free.erase(pool_free.begin());
        owned[t.pool].push_back(b);
        if (after_claim) std::exchange(after_claim, nullptr)(b);
        return true;
    }
    int fill_rounds() const override { return rounds; }
    std::string where() const override { return " in the fake blocks"; }
    Expected<FixedTake> take_fixed(const PoolTarget&, const engine::ClaimSpec&,
                                   const std::optional<IpAddress>&) override {
        return make_error(Code::kInternal, "no fixed pools here");
    }
    Status still_held(const Request&, const std::string&,
                      const std::vector<engine::AllocatedAddress>&) override {
        return Ok{};
    }
    Status after_gc(const std::string&, size_t, engine::NetworkStore&) override { return Ok{}; }
    bool tracks_releases() const override { return true; }
    Status after_release(const Request&, const std::string&, const std::vector<IpAddress>& r,
                         engine::Allocator&, engine::NetworkStore&) override {
        released.insert(released.end(), r.begin(), r.end());
        return Ok{};
    }
};

std::string pool_yaml(const std::string& name, const std::string& subnet, const std::string& ips) {
    return "---\napiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\nmetadata:\n"
           "  name: " +
           name + "\nspec:\n  subnet: " + subnet + "\n  ips: [\"" + ips + "\"]\n";
}

class PoolAdd : public ::testing::Test {
  protected:
    PoolAdd() {
        pools::load_text(catalog, "pools.yaml",
                         pool_yaml("a", "10.9.0.0/24", "10.9.0.0-10.9.0.255") +
                             pool_yaml("b", "10.8.0.0/24", "10.8.0.0-10.8.0.255"));
        catalog.finish();
    }

    Request request(const std::string& container) const {
        Request r;
        r.key = {container, "eth0"};
        r.pod = {"default", "pod-" + container, "", {}, {}};
        r.network.name = "net";
        r.network.data_dir = dir.sub("data");
        r.network.run_dir = dir.sub("run");
        r.network.durability = engine::NetworkConfig::Durability::kNone;
        r.network.reuse_delay_ms = 0;
        PoolMode pm;
        pm.pools_dir = dir.sub("pools");
        pm.config.default_ipv4_ippool = {"a", "b"};
        pm.node_name = "node-a";
        r.pools = std::move(pm);
        return r;
    }

    Expected<AddResult> add(const std::string& container) {
        Upkeep upkeep;
        return pool_add(request(container), catalog, source, upkeep);
    }

    // The addresses an attachment holds in the pool's state on this node.
    std::vector<IpAddress> held(const std::string& container, const std::string& pool) {
        auto cfg = reading_config(request(container), "ippool_" + pool, catalog);
        auto store = engine::open_network(*cfg);
        EXPECT_TRUE(store);
        std::vector<IpAddress> out;
        auto h = engine::Allocator(**store, *cfg).addresses_of({container, "eth0"});
        for (const auto& a : h ? *h : std::vector<engine::AllocatedAddress>{}) {
            out.push_back(a.address);
        }
        return out;
    }

    testing::TempDir dir;
    pools::Catalog catalog;
    FakeBlockSource source;
};

TEST_F(PoolAdd, APoolWithNoRoomFallsThroughToTheNextCandidate) {
    source.owned["b"] = {cidr("10.8.0.0/28")};  // pool a: no block and none to claim
    auto out = add("c1");
    ASSERT_TRUE(out) << out.error().msg;
    ASSERT_EQ(out->ips.size(), 1u);
    EXPECT_TRUE(cidr("10.8.0.0/28").contains(out->ips[0].address))
        << out->ips[0].address.to_string();
    EXPECT_EQ(out->ips[0].prefix, 24);
}

TEST_F(PoolAdd, WhenNoCandidateCanServeTheErrorNamesEachPoolAndWhy) {
    auto out = add("c1");
    ASSERT_FALSE(out);
    EXPECT_EQ(out.error().code, Code::kNoAddressFree);
    EXPECT_NE(out.error().msg.find("no block of a is left in the fake cluster"), std::string::npos)
        << out.error().msg;
    EXPECT_NE(out.error().msg.find("no block of b is left"), std::string::npos) << out.error().msg;
}

TEST_F(PoolAdd, ABlockFilledByAConcurrentAddIsLeftForTheNextClaim) {
    source.free_blocks["a"] = {cidr("10.9.0.16/28"), cidr("10.9.0.32/28")};
    // Between this ADD's claim of .16/28 and its look at it, other ADDs on the node take all of
    // it (each served from the node's blocks without a claim of its own).
    source.after_claim = [&](const Cidr& claimed) {
        for (int i = 0; i < 16; ++i) {
            auto other = add("other-" + std::to_string(i));
            ASSERT_TRUE(other) << other.error().msg;
            EXPECT_TRUE(claimed.contains(other->ips[0].address));
        }
    };
    auto out = add("c1");
    ASSERT_TRUE(out) << out.error().msg;
    EXPECT_TRUE(cidr("10.9.0.32/28").contains(out->ips[0].address))
        << out->ips[0].address.to_string();
    EXPECT_EQ(source.claims, 2) << "one claim filled by others, a second one for this ADD";
}

TEST_F(PoolAdd, AnAddressTakenInABlockGivenBackMeanwhileIsLetGoAndTheAddLooksAgain) {
    source.owned["a"] = {cidr("10.9.0.0/28"), cidr("10.9.0.16/28")};
    // The ADD chose .0/28; the block is given back before the ADD checks it still serves.
    source.after_take = [&] { source.owned["a"].erase(source.owned["a"].begin()); };
    auto out = add("c1");
    ASSERT_TRUE(out) << out.error().msg;
    EXPECT_TRUE(cidr("10.9.0.16/28").contains(out->ips[0].address))
        << out->ips[0].address.to_string();
    const auto holds = held("c1", "a");
    ASSERT_EQ(holds.size(), 1u) << "the address in the given-back block is not held";
    EXPECT_TRUE(holds[0] == out->ips[0].address);
    EXPECT_EQ(source.given_back_checks, 2);
}

TEST_F(PoolAdd, BlocksGivenBackAtEveryLookEndTheAddWithTryAgainAfterTheRoundsHoldingNothing) {
    source.owned["a"] = {cidr("10.9.0.0/28")};
    source.rounds = 3;
    int looks = 0;
    // Every address the ADD takes lies in a block given back meanwhile (a thrashing node).
    struct GiveBackEveryTime {
        FakeBlockSource& s;
        int& looks;
        void operator()() const {
            ++looks;
            const Cidr gone = s.owned["a"].front();
            s.owned["a"] = {Cidr{IpAddress{gone.network().value + 16, gone.address.family}, 28}};
            s.after_take = *this;
        }
    };
    source.after_take = GiveBackEveryTime{source, looks};
    auto out = add("c1");
    ASSERT_FALSE(out);
    EXPECT_EQ(out.error().code, Code::kTryAgainLater) << out.error().msg;
    EXPECT_EQ(looks, 3) << "one look per round, then the bound";
    EXPECT_TRUE(held("c1", "a").empty()) << "nothing held after the ADD failed";
}

TEST_F(PoolAdd, ClaimsThatKeepBeingFilledEndAfterTheRoundsWithNoAddressNamingWhere) {
    source.rounds = 3;
    for (unsigned i = 1; i <= 8; ++i) {  // .16/28 to .128/28: sixteen usable addresses each
        const IpAddress at{cidr("10.9.0.0/24").network().value + 16u * i, engine::Family::kV4};
        source.free_blocks["a"].push_back(Cidr{at, 28});
    }
    int fillers = 0;
    std::function<void(const Cidr&)> fill = [&](const Cidr&) {
        for (int i = 0; i < 16; ++i) ASSERT_TRUE(add("filler-" + std::to_string(fillers++)));
        source.after_claim = fill;
    };
    source.after_claim = fill;
    source.free_blocks["b"].clear();
    auto out = add("c1");
    ASSERT_FALSE(out);
    EXPECT_EQ(out.error().code, Code::kNoAddressFree);
    EXPECT_NE(out.error().msg.find("all IP addresses used out of a in the fake blocks"),
              std::string::npos)
        << out.error().msg;
    EXPECT_EQ(source.claims, 2) << "rounds 1 and 2 made room; round 3 was the last look";
}

// A pool whose room is coming (another node gives an idle block back) does not stop the ADD:
// the next candidate serves it; when none can, the ADD answers 11 so that the runtime retries.
TEST_F(PoolAdd, APoolWaitingForRoomFallsThroughAndTheAddSaysTryAgainWhenNoneServes) {
    source.waits = {"a"};
    source.owned["b"] = {cidr("10.8.0.0/28")};
    auto served = add("c1");
    ASSERT_TRUE(served) << served.error().msg;
    EXPECT_TRUE(cidr("10.8.0.0/28").contains(served->ips[0].address));
    source.owned["b"].clear();
    source.waits = {"a", "b"};
    auto waiting = add("c2");
    ASSERT_FALSE(waiting);
    EXPECT_EQ(waiting.error().code, Code::kTryAgainLater) << waiting.error().msg;
    EXPECT_NE(waiting.error().msg.find("gives a block of a back"), std::string::npos);
}

TEST_F(PoolAdd, ARepeatedAddAnswersWhatTheAttachmentHoldsWithoutAClaim) {
    source.owned["a"] = {cidr("10.9.0.0/28")};
    auto first = add("c1");
    ASSERT_TRUE(first) << first.error().msg;
    auto again = add("c1");
    ASSERT_TRUE(again) << again.error().msg;
    EXPECT_TRUE(again->ips[0].address == first->ips[0].address);
    EXPECT_EQ(source.claims, 0);
}

TEST_F(PoolAdd, ARepeatedAddHoldingAnAddressInABlockTheNodeLostStartsAfresh) {
    source.owned["a"] = {cidr("10.9.0.0/28"), cidr("10.9.0.16/28")};
    auto first = add("c1");
    ASSERT_TRUE(first) << first.error().msg;
    ASSERT_TRUE(cidr("10.9.0.0/28").contains(first->ips[0].address));
    source.owned["a"] = {cidr("10.9.0.16/28")};  // the block was taken from the node
    auto again = add("c1");
    ASSERT_TRUE(again) << again.error().msg;
    EXPECT_TRUE(cidr("10.9.0.16/28").contains(again->ips[0].address))
        << again->ips[0].address.to_string();
    EXPECT_EQ(held("c1", "a").size(), 1u);
}

TEST_F(PoolAdd, ADelLetsGoOfTheAddressAndTellsTheSourceWhatItReleased) {
    source.owned["a"] = {cidr("10.9.0.0/28")};
    auto out = add("c1");
    ASSERT_TRUE(out) << out.error().msg;
    Upkeep upkeep;
    ASSERT_TRUE(pool_del(request("c1"), catalog, source, upkeep));
    ASSERT_EQ(source.released.size(), 1u);
    EXPECT_TRUE(source.released[0] == out->ips[0].address);
    EXPECT_TRUE(held("c1", "a").empty());
    // A second DEL (the runtime's Remove after its Stop) releases nothing more.
    ASSERT_TRUE(pool_del(request("c1"), catalog, source, upkeep));
    EXPECT_EQ(source.released.size(), 1u);
}

// A pod the API server shows as a StatefulSet's, which keeps its address by the default alone,
// gets an ordinary address in a pool cut into blocks (a sticky one would pin the block to this
// node): no fixed claim is made there.
TEST_F(PoolAdd, AStatefulSetPodByDefaultGetsAnOrdinaryAddressWhereBlocksServe) {
    source.owned["a"] = {cidr("10.9.0.0/28")};
    Request r = request("c1");
    r.pod.name = "web-0";
    r.pod.from_api = true;
    r.pod.controller = pools::Controller{"apps/v1", "StatefulSet", "web"};
    r.kubernetes = KubernetesApi{"/nowhere/kubeconfig", 2000, 1000, "", true, 60};
    Upkeep upkeep;
    auto out = pool_add(r, catalog, source, upkeep);
    ASSERT_TRUE(out) << out.error().msg;
    auto cfg = reading_config(r, "ippool_a", catalog);
    auto store = engine::open_network(*cfg);
    ASSERT_TRUE(store);
    EXPECT_TRUE(engine::Allocator(**store, *cfg).claims().empty());
    EXPECT_EQ(held("c1", "a").size(), 1u);
}

}  // namespace
}  // namespace shmipam::ipam
