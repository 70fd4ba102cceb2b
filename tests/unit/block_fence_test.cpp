// Cluster mode's block release in the engine (Allocator::while_block_empty, docs/cluster.md,
// "Giving a block back"): the block is held whole while it is given back, never when an address
// of it is in use or cooling, and a process killed holding it leaves nothing stuck.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "engine/inspect/inspect.h"
#include "tests/support/network_fixture.h"

namespace shmipam::engine {
namespace {

using testing::add_request;
using testing::first_address;

class BlockFence : public ::testing::Test {
  protected:
    void SetUp() override { open(0); }
    void open(uint64_t reuse_delay_ms) {
        alloc.reset();
        store.reset();
        cfg = testing::network_config(dir, {testing::range_set({{"10.80.0.0/24", "", "", ""}})},
                                      reuse_delay_ms);
        cfg.block_prefix_v4 = 28;
        store = testing::open_store(cfg);
        alloc = std::make_unique<Allocator>(*store, cfg);
    }
    static IpAddress ip(const char* text) { return *IpAddress::parse(text); }
    // A process holding the block 10.80.0.16/28 is SIGKILLed between the hold and the store's
    // delete.
    void killed_holding_the_block() {
        const pid_t child = ::fork();
        if (child == 0) {
            auto s = engine::open_network(cfg, shm::current_process());
            if (!s) ::_exit(2);
            Allocator a(**s, cfg);
            (void)a.while_block_empty(ip("10.80.0.16"), []() -> Status {
                ::raise(SIGKILL);
                return Ok{};
            });
            ::_exit(3);
        }
        int status = 0;
        ASSERT_EQ(::waitpid(child, &status, 0), child);
        ASSERT_TRUE(WIFSIGNALED(status)) << status;
    }
    size_t slots_in(const std::string& block, const std::string& state) {
        size_t n = 0;
        auto d = dump(*store);
        for (const auto& s : d->slots) n += s.block == block && s.state == state;
        return n;
    }
    testing::TempDir dir;
    NetworkConfig cfg;
    std::unique_ptr<NetworkStore> store;
    std::unique_ptr<Allocator> alloc;
};

TEST_F(BlockFence, AnEmptyBlockIsHeldWholeWhileItIsGivenBackAndFreeAfter) {
    ASSERT_EQ(first_address(alloc->add(add_request("a", "eth0", {"10.80.0.5"}))), "10.80.0.5");
    bool ran = false;
    auto r = alloc->while_block_empty(ip("10.80.0.16"), [&]() -> Status {
        ran = true;
        EXPECT_EQ(slots_in("10.80.0.16/28", "claiming"), 16u);
        // No ADD can take an address of the block meanwhile.
        auto taken = alloc->add(add_request("b", "eth0", {"10.80.0.20"}));
        EXPECT_FALSE(taken) << "an address of a block being given back was handed out";
        return Ok{};
    });
    ASSERT_TRUE(r) << r.error().msg;
    EXPECT_TRUE(r->ran);
    EXPECT_TRUE(ran);
    EXPECT_EQ(slots_in("10.80.0.16/28", "claiming"), 0u);
    EXPECT_EQ(first_address(alloc->add(add_request("c", "eth0", {"10.80.0.20"}))), "10.80.0.20");
    testing::expect_verify_clean(*store);
}

TEST_F(BlockFence, ABlockWithAnAddressInUseIsNeverGivenBack) {
    ASSERT_EQ(first_address(alloc->add(add_request("a", "eth0", {"10.80.0.30"}))), "10.80.0.30");
    bool ran = false;
    auto r = alloc->while_block_empty(ip("10.80.0.16"), [&]() -> Status {
        ran = true;
        return Ok{};
    });
    ASSERT_TRUE(r) << r.error().msg;
    EXPECT_FALSE(r->ran);
    EXPECT_TRUE(r->in_use);
    EXPECT_FALSE(ran);
    // What it held on the way is let go.
    EXPECT_EQ(slots_in("10.80.0.16/28", "claiming"), 0u);
    EXPECT_EQ(first_address(alloc->add(add_request("b", "eth0", {"10.80.0.17"}))), "10.80.0.17");
    testing::expect_verify_clean(*store);
}

TEST_F(BlockFence, ACoolingAddressKeepsTheBlockUntilItsCoolDownEnds) {
    open(60'000);
    ASSERT_EQ(first_address(alloc->add(add_request("a", "eth0", {"10.80.0.17"}))), "10.80.0.17");
    const uint64_t before_del = base::boot_ns();
    ASSERT_TRUE(alloc->del({"a", "eth0"}));
    auto r = alloc->while_block_empty(ip("10.80.0.16"), [] { return Status{Ok{}}; });
    // However slow the machine, no more than this has passed since the release.
    const uint64_t elapsed_ms = (base::boot_ns() - before_del) / 1'000'000 + 1;
    ASSERT_TRUE(r) << r.error().msg;
    EXPECT_FALSE(r->ran);
    EXPECT_FALSE(r->in_use);
    EXPECT_GE(r->cooling_left_ms + elapsed_ms, 60'000u);
    EXPECT_LE(r->cooling_left_ms, 60'001u);
    EXPECT_EQ(slots_in("10.80.0.16/28", "cooling"), 1u) << "its cool-down is kept";
    testing::expect_verify_clean(*store);
}

TEST_F(BlockFence, AProcessKilledHoldingTheBlockLeavesNothingStuck) {
    killed_holding_the_block();
    EXPECT_EQ(slots_in("10.80.0.16/28", "claiming"), 16u) << "the dead process's hold";
    // The next release heals the dead hold and holds the block itself; ADDs get its addresses.
    auto r = alloc->while_block_empty(ip("10.80.0.16"), [] { return Status{Ok{}}; });
    ASSERT_TRUE(r) << r.error().msg;
    EXPECT_TRUE(r->ran);
    for (int i = 0; i < 16; ++i) {
        auto out = alloc->add(
            add_request("p" + std::to_string(i), "eth0", {"10.80.0." + std::to_string(16 + i)}));
        EXPECT_TRUE(out) << i << ": " << out.error().msg;
    }
    testing::expect_verify_clean(*store);
}

TEST_F(BlockFence, AnAddAfterAKilledHoldGetsTheBlocksAddressesWithoutARelease) {
    killed_holding_the_block();
    // A network whose only room is that block: the ADDs heal the dead hold as they meet it.
    NetworkConfig narrow = cfg;
    narrow.range_sets = {testing::range_set({{"10.80.0.0/24", "10.80.0.16", "10.80.0.31", ""}})};
    Allocator a(*store, narrow);
    for (int i = 0; i < 16; ++i) {
        auto out = a.add(add_request("q" + std::to_string(i)));
        EXPECT_TRUE(out) << i << ": " << out.error().msg;
    }
    testing::expect_verify_clean(*store);
}

}  // namespace
}  // namespace shmipam::engine
