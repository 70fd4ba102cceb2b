#include "engine/slots/attachment_index.h"

#include <gtest/gtest.h>

#include "shm/atomic_word.h"
#include "tests/support/network_fixture.h"

namespace shmipam::engine {
namespace {

using format::EntryState;

class AttachmentIndexTest : public ::testing::Test {
  protected:
    testing::TempDir dir;
    NetworkConfig cfg =
        testing::network_config(dir, {testing::range_set({{"10.7.0.0/24", "", "", ""}})});
    std::unique_ptr<NetworkStore> store = testing::open_store(cfg);
    AttachmentIndex idx{store->index(), nullptr};
    shm::LeaseHandle lease = *store->index().leases().acquire(store->self());
};

TEST_F(AttachmentIndexTest, ClaimCommitFindRelease) {
    const Fingerprint fp = fingerprint("c1", "eth0");
    EXPECT_TRUE(idx.find(fp).empty());
    EntryClaim c = idx.claim(fp, lease);
    ASSERT_EQ(c.kind, ClaimKind::kClaimed);
    EXPECT_EQ(idx.find(fp).size(), 1u);
    // While CLAIMING, another claim for the same attachment is busy.
    EXPECT_EQ(idx.claim(fp, lease).kind, ClaimKind::kBusy);
    ASSERT_TRUE(idx.commit(c.entry, fp));
    EntryClaim again = idx.claim(fp, lease);
    EXPECT_EQ(again.kind, ClaimKind::kExisting);
    EXPECT_EQ(again.entry.index, c.entry.index);
    uint64_t releasing = 0;
    const uint64_t committed = shm::load_word(store->index().entry(c.entry.index).state);
    ASSERT_TRUE(idx.begin_release({c.entry.index, committed}, lease, &releasing));
    EXPECT_FALSE(idx.begin_release({c.entry.index, committed}, lease, &releasing))
        << "a stale release must fail";
    ASSERT_TRUE(idx.retire(c.entry.index, releasing));
    EXPECT_TRUE(idx.find(fp).empty());
}

TEST_F(AttachmentIndexTest, CollidingBucketsProbeAndTombstonesAreReused) {
    // Find attachments that share a bucket.
    std::vector<Fingerprint> same;
    const uint64_t target = idx.bucket(fingerprint("x0", "eth0"));
    for (int i = 0; same.size() < 3 && i < 200000; ++i) {
        Fingerprint f = fingerprint("x" + std::to_string(i), "eth0");
        if (idx.bucket(f) == target) same.push_back(f);
    }
    ASSERT_EQ(same.size(), 3u);
    std::vector<EntryRef> refs;
    for (const auto& f : same) {
        EntryClaim c = idx.claim(f, lease);
        ASSERT_EQ(c.kind, ClaimKind::kClaimed);
        ASSERT_TRUE(idx.commit(c.entry, f));
        refs.push_back({c.entry.index, shm::load_word(store->index().entry(c.entry.index).state)});
    }
    EXPECT_GE(store->index().header().max_probe, 2u);
    for (size_t i = 0; i < same.size(); ++i) {
        auto found = idx.find(same[i]);
        ASSERT_EQ(found.size(), 1u);
        EXPECT_EQ(found[0].index, refs[i].index);
    }
    // Free the first; the fourth insert in the bucket reuses its tombstone.
    uint64_t rel = 0;
    ASSERT_TRUE(idx.begin_release(refs[0], lease, &rel));
    ASSERT_TRUE(idx.retire(refs[0].index, rel));
    EXPECT_EQ(idx.find(same[1]).size(), 1u) << "lookups go past tombstones";
    EntryClaim reuse = idx.claim(fingerprint("reuser", "eth0"), lease);
    (void)reuse;
    EntryClaim again = idx.claim(same[0], lease);
    ASSERT_EQ(again.kind, ClaimKind::kClaimed);
}

TEST_F(AttachmentIndexTest, FingerprintsDifferByInterfaceAndContainer) {
    EXPECT_NE(fingerprint("a", "eth0"), fingerprint("a", "eth1"));
    EXPECT_NE(fingerprint("a", "eth0"), fingerprint("b", "eth0"));
    EXPECT_NE(fingerprint("ab", "c"), fingerprint("a", "bc"));
    EXPECT_EQ(fingerprint("a", "eth0"), fingerprint("a", "eth0"));
}

}  // namespace
}  // namespace shmipam::engine
