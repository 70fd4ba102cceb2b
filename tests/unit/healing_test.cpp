// Regression tests for healing: work that names a lease whose holder is gone, and healers that
// act on an entry after it moved on to a new tenancy.
#include <gtest/gtest.h>

#include <set>

#include "base/clock.h"
#include "engine/policy/next_fit.h"
#include "engine/recovery/recovery.h"
#include "engine/slots/attachment_index.h"
#include "engine/slots/slot_ops.h"
#include "engine/state/journal_records.h"
#include "shm/atomic_word.h"
#include "tests/support/faulty_file_system.h"
#include "tests/support/network_fixture.h"

namespace shmipam::engine {
namespace {

using format::SlotState;

class HealingTest : public ::testing::Test {
  protected:
    void SetUp() override {
        cfg = testing::network_config(dir, {testing::range_set({{"10.8.0.0/29", "", "", ""}})});
        store = testing::open_store(cfg);
        alloc = std::make_unique<Allocator>(*store, cfg);
    }
    // A lease nobody holds: lease 7 is free in the table (generation 0), this names generation 3.
    shm::LeaseHandle gone_lease() {
        return {7, shm::LeaseTable::make_word(4000000, 3, store->self().pidns_tag, 1)};
    }
    shm::BlockFile& block() { return **store->block_for(*IpAddress::parse("10.8.0.2"), true); }
    SlotState state(uint64_t slot) {
        return shm::SlotWord::decode(slot_ops::load_state(block(), slot)).state;
    }

    // The op of the journal's winning record for 10.8.0<suffix> (replay's view).
    format::JournalOp newest_op(const std::string& suffix) {
        auto scan = shm::Journal::scan(store->journal().dir());
        EXPECT_TRUE(scan);
        const IpAddress want = *IpAddress::parse("10.8.0" + suffix);
        for (const auto& r : shm::Journal::newest_per_address(scan->records)) {
            if (record_address(r) == want) return format::JournalOp(r.op);
        }
        return format::JournalOp(0);
    }

    // .2 .. .6 are usable: all five must be handed out, .2 (the planted one) included.
    void fill_expecting_all_five() {
        std::set<std::string> got;
        for (int i = 0; i < 5; ++i) {
            auto out = alloc->add(testing::add_request("c" + std::to_string(i)));
            ASSERT_TRUE(out) << i << ": " << out.error().msg;
            got.insert(testing::first_address(out));
        }
        EXPECT_EQ(got.count("10.8.0.2"), 1u);
        testing::expect_verify_clean(*store);
    }

    testing::TempDir dir;
    NetworkConfig cfg;
    std::unique_ptr<NetworkStore> store;
    std::unique_ptr<Allocator> alloc;
};

TEST_F(HealingTest, ASlotClaimingForAGoneLeaseIsReclaimedWhenTheNetworkFillsUp) {
    uint64_t claimed = 0;
    ASSERT_TRUE(
        slot_ops::claim(block(), 2, slot_ops::load_state(block(), 2), gone_lease(), &claimed));
    fill_expecting_all_five();
}

TEST_F(HealingTest, AnAllocationToATenancyThatEndedIsReclaimedWhenTheNetworkFillsUp) {
    // Left by a healer that retired the entry of a half-published claim and died before rolling
    // its slots back: .2 is ALLOCATED to entry 5, tenancy 9, which no live entry is.
    auto lease = *store->index().leases().acquire(store->self());
    uint64_t claimed = 0;
    ASSERT_TRUE(slot_ops::claim(block(), 2, slot_ops::load_state(block(), 2), lease, &claimed));
    ASSERT_TRUE(slot_ops::publish(block(), 2, claimed, 5, 0, 9, 1, 1));
    store->index().leases().release(lease);
    auto before = verify(*store);
    ASSERT_TRUE(before);
    std::set<std::string> kinds;
    for (const auto& v : before->violations) kinds.insert(v.kind);
    // Never journaled either (nothing planted in the journal): verify says both.
    EXPECT_EQ(kinds, (std::set<std::string>{"orphan-allocation", "unjournaled-allocation"}));
    fill_expecting_all_five();
}

TEST_F(HealingTest, ASlotReleasingForAGoneLeaseRollsForward) {
    ASSERT_TRUE(alloc->add(testing::add_request("a")));  // .2
    uint64_t releasing = 0;
    ASSERT_TRUE(
        slot_ops::begin_release(block(), 2, slot_ops::load_state(block(), 2), 7, 3, &releasing));
    EXPECT_TRUE(heal_slot_if_orphaned(*store, block(), 2, releasing));
    EXPECT_EQ(state(2), SlotState::kCooling);
    // A healer that finishes a release journals it, or a rebuild would bring back an attachment
    // whose DEL has answered: its RELEASE is the newest record for .2.
    EXPECT_EQ(newest_op(".2"), format::JournalOp::kRelease) << "the release was not journaled";
}

// An ALLOCATED slot of a tenancy that ended goes FREE with a ROLLBACK record, so that no rebuild
// restores the allocation for nobody.
TEST_F(HealingTest, AnOrphanedAllocationRolledBackIsJournaled) {
    ASSERT_TRUE(alloc->add(testing::add_request("a")));  // .2
    const Fingerprint fp = fingerprint("a", "eth0");
    const EntryRef e = AttachmentIndex(store->index(), nullptr).find(fp).at(0);
    // The tenancy ends under the slot (its rollback's healer died before reaching the slot).
    ASSERT_TRUE(AttachmentIndex(store->index(), nullptr).retire(e.index, e.word));
    EXPECT_TRUE(heal_slot_if_orphaned(*store, block(), 2, slot_ops::load_state(block(), 2)));
    EXPECT_EQ(state(2), SlotState::kFree);
    EXPECT_EQ(newest_op(".2"), format::JournalOp::kRollback) << "the rollback was not journaled";
}

// A dead holder whose work its reaper cannot finish (the journal cannot be written) is not gone:
// its lease stays held, and a slot finder never rolls its RELEASING slot forward without the
// record. A slot whose release cannot be journaled stays RELEASING.
TEST_F(HealingTest, AHealerThatCannotJournalNeverFinishesAnOrphanedRelease) {
    ASSERT_TRUE(alloc->add(testing::add_request("a")));  // .2
    uint64_t releasing = 0;
    ASSERT_TRUE(
        slot_ops::begin_release(block(), 2, slot_ops::load_state(block(), 2), 7, 3, &releasing));
    testing::InstalledFaultyFs faulty{dir.sub("kept")};
    faulty.fs.fail(testing::FsCall::kWrite, 1, EIO, /*from_then_on=*/true);
    EXPECT_FALSE(heal_slot_if_orphaned(*store, block(), 2, releasing));
    EXPECT_EQ(state(2), SlotState::kReleasing) << "rolled forward without its record";
}

TEST_F(HealingTest, AnEntryClaimingForAGoneLeaseDoesNotBlockItsAttachment) {
    AttachmentIndex idx(store->index(), nullptr);
    const Fingerprint fp = fingerprint("stuck", "eth0");
    ASSERT_EQ(idx.claim(fp, gone_lease()).kind, ClaimKind::kClaimed);
    // DEL must finish (it used to spin forever), and ADD must get an address (it used to be
    // refused as busy forever).
    EXPECT_TRUE(alloc->del({"stuck", "eth0"}));
    ASSERT_EQ(idx.claim(fp, gone_lease()).kind, ClaimKind::kClaimed);
    auto out = alloc->add(testing::add_request("stuck"));
    ASSERT_TRUE(out) << out.error().msg;
    EXPECT_FALSE(out->existing);
    testing::expect_verify_clean(*store);
}

TEST_F(HealingTest, AStaleHealerNeverTouchesTheNextTenancyOfAnEntry) {
    // Tenancy 1 of the entry claims and publishes .2, then is rolled back by healer R1.
    AttachmentIndex idx(store->index(), nullptr);
    const Fingerprint fp = fingerprint("t", "eth0");
    auto lease = *store->index().leases().acquire(store->self());
    EntryClaim first = idx.claim(fp, lease);
    ASSERT_EQ(first.kind, ClaimKind::kClaimed);
    format::Entry& ent = store->index().entry(first.entry.index);
    ent.ref_count = 1;
    ArenaScanner scanner(*store, lease, slot_healer(*store));
    ClaimContext ctx{scanner, store->index().header().cursor, 0, base::boot_ns(),
                     [&](const IpAddress& a) {
                         auto b = a.to_bytes();
                         std::copy(b.begin(), b.end(), ent.refs[0].address);
                         ent.refs[0].family = 4;
                         ent.refs[0].block_prefix = 24;
                     }};
    auto got = claim_next(ctx, cfg.range_sets[0], 0);
    ASSERT_TRUE(got);
    const uint16_t t1 = shm::EntryWord::decode(first.entry.word).gen;
    ASSERT_TRUE(
        slot_ops::publish(*got->block, got->slot, got->word, first.entry.index, 0, t1, fp.fp1, 1));
    ASSERT_TRUE(roll_back_claim(*store, first.entry.index, first.entry.word));
    store->index().leases().release(lease);
    // Tenancy 2 of the same entry (same attachment, same bucket) takes .2 again and commits.
    shm::store_word(store->index().header().cursor[0], 0);
    auto second = alloc->add(testing::add_request("t"));
    ASSERT_TRUE(second);
    ASSERT_EQ(testing::first_address(second), "10.8.0.2");
    ASSERT_EQ(idx.find(fp).at(0).index, first.entry.index) << "the entry must have been reused";
    // Healer R2 wakes up with tenancy 1's word: it must change nothing.
    EXPECT_TRUE(roll_back_claim(*store, first.entry.index, first.entry.word));
    EXPECT_EQ(state(2), SlotState::kAllocated);
    EXPECT_TRUE(alloc->addresses_of({"t", "eth0"}));
    testing::expect_verify_clean(*store);
}

TEST_F(HealingTest, ARequestForAnAddressMidClaimByALiveInvocationIsTryAgain) {
    auto lease = *store->index().leases().acquire(store->self());  // alive: this process
    uint64_t claimed = 0;
    ASSERT_TRUE(slot_ops::claim(block(), 5, slot_ops::load_state(block(), 5), lease, &claimed));
    auto out = alloc->add(testing::add_request("x", "eth0", {"10.8.0.5"}));
    ASSERT_FALSE(out);
    EXPECT_EQ(out.error().code, Code::kTryAgainLater);
    ASSERT_TRUE(slot_ops::roll_back(block(), 5, claimed));
    store->index().leases().release(lease);
}

// The safety net under "a healer never undoes a partly cooled release": whatever left a
// committed entry naming a slot that is not its own (here the slot simply freed under it), CHECK
// and a repeated ADD answer 11 instead of an address someone else may hold.
TEST_F(HealingTest, ACheckNeverAnswersAnAddressItsAttachmentDoesNotOwn) {
    ASSERT_EQ(testing::first_address(alloc->add(testing::add_request("t"))), "10.8.0.2");
    ASSERT_TRUE(slot_ops::roll_back(block(), 2, slot_ops::load_state(block(), 2)));
    auto check = alloc->addresses_of({"t", "eth0"});
    ASSERT_FALSE(check);
    EXPECT_EQ(check.error().code, Code::kTryAgainLater);
    auto repeated = alloc->add(testing::add_request("t"));
    ASSERT_FALSE(repeated);
    EXPECT_EQ(repeated.error().code, Code::kTryAgainLater);
}

// A live ADD of the attachment holds its entry claim (CLAIMING) and has not stamped its
// fingerprint yet when the runtime's DEL comes. The DEL counts that entry busy (11), never
// absent: answering success would let the ADD commit afterwards, and a pod the runtime deleted
// would hold an address. The wait is bounded by time, not by a count of yields (a few
// milliseconds on a busy node).
TEST_F(HealingTest, ADelNeverSucceedsPastALiveUnstampedAdd) {
    AttachmentIndex idx(store->index(), nullptr);
    const Fingerprint fp = fingerprint("a", "eth0");
    auto lease = *store->index().leases().acquire(store->self());  // alive: this process
    EntryClaim claim = idx.claim(fp, lease);
    ASSERT_EQ(claim.kind, ClaimKind::kClaimed);
    shm::store_word(store->index().entry(claim.entry.index).fp1, 0);  // not stamped yet
    const uint64_t t0 = base::boot_ns();
    auto del = alloc->del({"a", "eth0"});
    ASSERT_FALSE(del) << "DEL answered success while the ADD it races may still commit";
    EXPECT_EQ(del.error().code, Code::kTryAgainLater);
    EXPECT_LT(base::boot_ns() - t0, 10'000'000'000u) << "bounded by time";
    store->index().leases().release(lease);
}

// A slot names its owner's tenancy in 11 bits, so an allocation left behind by a tenancy that
// ended looks, 2048 tenancies of its entry later, owned by the live tenant. `shmipamctl release
// --address` still releases nothing: the live tenant does not name the address, and releasing it
// would free an unrelated pod's addresses while it uses them.
TEST_F(HealingTest, ReleaseByAddressNeverReleasesAnotherTenancy) {
    ASSERT_EQ(testing::first_address(alloc->add(testing::add_request("t"))), "10.8.0.2");
    AttachmentIndex idx(store->index(), nullptr);
    const Fingerprint fp = fingerprint("t", "eth0");
    const EntryRef e = idx.find(fp).at(0);
    // The same entry 2048 tenancies later (the slot's 11 bits cannot tell), holding .3.
    shm::EntryWord w = shm::EntryWord::decode(e.word);
    w.gen = uint16_t(w.gen + 2048);
    format::Entry& ent = store->index().entry(e.index);
    const auto three = IpAddress::parse("10.8.0.3")->to_bytes();
    std::copy(three.begin(), three.end(), ent.refs[0].address);
    shm::store_word(ent.fp1, AttachmentIndex::stamped_fp1(w.encode(), fp));
    shm::store_word(ent.state, w.encode());
    auto released = alloc->release_address(*IpAddress::parse("10.8.0.2"), /*dry_run=*/true);
    ASSERT_TRUE(released) << released.error().msg;
    EXPECT_TRUE(released->empty()) << "released the live tenant of the entry";
}

}  // namespace
}  // namespace shmipam::engine
