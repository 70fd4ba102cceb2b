#include "shm/codec.h"

#include <gtest/gtest.h>

#include "engine/slots/slot_ops.h"
#include "tests/support/network_fixture.h"

namespace shmipam {
namespace {

using format::EntryState;
using format::SlotState;
using shm::EntryWord;
using shm::SlotWord;

TEST(StateWords, SlotWordRoundTripAndGeneration) {
    SlotWord s{SlotState::kReleasing, 1023, 0xBEEF, 0xFFFFFFFF};
    EXPECT_EQ(SlotWord::decode(s.encode()).state, SlotState::kReleasing);
    EXPECT_EQ(SlotWord::decode(s.encode()).lease_index, 1023);
    EXPECT_EQ(SlotWord::decode(s.encode()).lease_gen, 0xBEEF);
    EXPECT_EQ(SlotWord::decode(s.encode()).gen, 0xFFFFFFFFu);
    const uint64_t next = SlotWord::next(s.encode(), SlotState::kCooling);
    EXPECT_EQ(SlotWord::decode(next).gen, 0u);  // wraps, never stalls
    EXPECT_EQ(SlotWord::decode(next).lease_index, 0);
    EXPECT_NE(next, s.encode());
}

TEST(StateWords, EntryGenerationCountsTenancies) {
    const uint64_t w0 = 0;
    const uint64_t claiming = EntryWord::next(w0, EntryState::kClaiming, 0x1234, 5, 6);
    const uint64_t committed = EntryWord::next(claiming, EntryState::kCommitted, 0x1234);
    const uint64_t releasing = EntryWord::next(committed, EntryState::kReleasing, 0x1234, 7, 8);
    const uint64_t tomb = EntryWord::next(releasing, EntryState::kTombstone, 0x1234);
    const uint64_t again = EntryWord::next(tomb, EntryState::kClaiming, 0x1234, 5, 6);
    EXPECT_EQ(EntryWord::decode(claiming).gen, EntryWord::decode(tomb).gen);
    EXPECT_EQ(EntryWord::decode(again).gen, EntryWord::decode(claiming).gen + 1);
    EXPECT_NE(again, claiming);  // same holder, new tenancy: a stale CAS cannot succeed
    EXPECT_TRUE(EntryWord::decode(releasing).held_by(7, 8));
    EXPECT_EQ(EntryWord::decode(claiming).fp16, 0x1234);
}

class SlotOpsTest : public ::testing::Test {
  protected:
    testing::TempDir dir;
    engine::NetworkConfig cfg =
        testing::network_config(dir, {testing::range_set({{"10.5.0.0/24", "", "", ""}})});
    std::unique_ptr<engine::NetworkStore> store = testing::open_store(cfg);
    shm::BlockFile* block() {
        return *store->block_for(*engine::IpAddress::parse("10.5.0.9"), true);
    }
};

TEST_F(SlotOpsTest, WalksTheWholeStateMachineAndKeepsTheHint) {
    namespace ops = engine::slot_ops;
    auto lease = store->index().leases().acquire(store->self());
    ASSERT_TRUE(lease);
    shm::BlockFile& b = *block();
    const uint64_t i = 9;
    auto bit = [&] { return (b.bitmap()[0] >> i) & 1; };
    uint64_t w = ops::load_state(b, i);
    uint64_t claimed = 0;
    ASSERT_TRUE(ops::claim(b, i, w, *lease, &claimed));
    EXPECT_EQ(SlotWord::decode(claimed).state, SlotState::kClaiming);
    EXPECT_TRUE(SlotWord::decode(claimed).held_by(uint16_t(lease->index), lease->gen16()));
    EXPECT_EQ(bit(), 1u);
    // A second claim with the stale word fails: the generation moved.
    uint64_t other = 0;
    EXPECT_FALSE(ops::claim(b, i, w, *lease, &other));
    ASSERT_TRUE(ops::publish(b, i, claimed, 3, 0, 1, 42, 1));
    EXPECT_TRUE(SlotWord::decode(ops::load_state(b, i)).owned_by(3, 1));
    EXPECT_FALSE(SlotWord::decode(ops::load_state(b, i)).owned_by(3, 2));
    const uint64_t allocated = ops::load_state(b, i);
    EXPECT_EQ(SlotWord::decode(allocated).state, SlotState::kAllocated);
    uint64_t releasing = 0;
    ASSERT_TRUE(ops::begin_release(b, i, allocated, 1, 2, &releasing));
    EXPECT_FALSE(ops::begin_release(b, i, allocated, 1, 2, &releasing))
        << "stale release must fail";
    ASSERT_TRUE(ops::finish_release(b, i, releasing, 777));
    EXPECT_EQ(SlotWord::decode(ops::load_state(b, i)).state, SlotState::kCooling);
    EXPECT_EQ(b.slot(i).changed_boot_ns, 777u);
    EXPECT_EQ(bit(), 0u) << "cooling addresses are candidates in the hint";
    EXPECT_EQ(b.header().claims, 1u);
    EXPECT_EQ(b.header().releases, 1u);
    store->index().leases().release(*lease);
}

TEST_F(SlotOpsTest, SyncHintRepairsAStaleBit) {
    shm::BlockFile& b = *block();
    b.bitmap()[0] |= uint64_t{1} << 20;  // stale: slot 20 is free
    engine::slot_ops::sync_hint(b, 20);
    EXPECT_EQ((b.bitmap()[0] >> 20) & 1, 0u);
}

TEST(Codec, AStampSaysWhoseTheFieldIs) {
    const uint64_t f = shm::stamp::pack(7, 0x1234'5678'9ABCull);
    EXPECT_EQ(shm::stamp::gen_of(f), 7);
    EXPECT_EQ(shm::stamp::value_of(f), 0x1234'5678'9ABCull);
    EXPECT_EQ(shm::stamp::value_if_stamped_by(7, f), 0x1234'5678'9ABCull);
    EXPECT_EQ(shm::stamp::value_if_stamped_by(8, f), 0u) << "an earlier holder's field";
    EXPECT_EQ(shm::stamp::value_of(shm::stamp::pack(1, ~uint64_t{0})), shm::stamp::kValueMask)
        << "a value wider than 48 bits never spills into the stamp";
}

TEST(Codec, LeaseWordTargetAndSlotOwnerRoundTrip) {
    const uint64_t w = shm::LeaseWord::make(4'194'303, 0xABCD, 0x77, 12345);
    EXPECT_EQ(shm::LeaseWord::pid_of(w), 4'194'303);
    EXPECT_EQ(shm::LeaseWord::gen_of(w), 0xABCD);
    EXPECT_EQ(shm::LeaseWord::start_of(w), 12345u);
    EXPECT_EQ(shm::LeaseWord::ns_of(w), shm::LeaseWord::ns_hash(0x77));
    EXPECT_EQ(shm::LeaseWord::pid_of(shm::LeaseWord::free(0xABCD)), 0) << "free: no holder";
    EXPECT_EQ(shm::LeaseWord::gen_of(shm::LeaseWord::free(0xABCD)), 0xABCD);

    const uint64_t t = shm::LeaseTarget::pack(131071, 0xFFFF);
    EXPECT_EQ(shm::LeaseTarget::entry_plus_one(t), 131072u);
    EXPECT_EQ(shm::LeaseTarget::entry_gen(t), 0xFFFF);

    const uint64_t o = shm::SlotOwner::pack(99, 3, 0x1234);
    EXPECT_EQ(shm::SlotOwner::entry_plus_one(o), 100u);
    EXPECT_EQ(shm::SlotOwner::range_set(o), 3u);
    EXPECT_EQ(shm::SlotOwner::entry_gen(o), 0x1234);
}

}  // namespace
}  // namespace shmipam
