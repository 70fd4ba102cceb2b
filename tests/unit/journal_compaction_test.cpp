// Compaction while invocations append: the journal stays bounded, a rebuild from checkpoint plus
// segments keeps every allocation, and a record reserved but not yet written (a live intent)
// holds the boundary back, while a dead appender's intent does not.
#include "engine/state/journal_compaction.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "engine/state/journal_records.h"
#include "shm/atomic_word.h"
#include "tests/support/network_fixture.h"

namespace shmipam::engine {
namespace {

using format::kJournalRecordsPerSegment;

class JournalCompaction : public ::testing::Test {
  protected:
    void SetUp() override {
        cfg = testing::network_config(dir, {testing::range_set({{"10.70.0.0/22", "", "", ""}})});
        cfg.durability = NetworkConfig::Durability::kNone;  // the protocol, not the disk
        cfg.journal_max_segments = 2;
        open();
    }
    void open() {
        alloc.reset();
        store = testing::open_store(cfg);
        ASSERT_TRUE(store);
        alloc = std::make_unique<Allocator>(*store, cfg);
    }
    // ADD then DEL of one attachment, then the upkeep the plugin runs after answering.
    void churn(int pairs, bool bounded = true) {
        for (int i = 0; i < pairs; ++i) {
            ASSERT_TRUE(alloc->add(testing::add_request("churn")));
            compact_journal_if_due(*store);
            ASSERT_TRUE(alloc->del({"churn", "eth0"}));
            compact_journal_if_due(*store);
            if (bounded) {
                ASSERT_LE(segment_files(), cfg.journal_max_segments + 1) << "after pair " << i;
            }
        }
    }
    size_t segment_files() const {
        size_t n = 0;
        for (const auto& f : std::filesystem::directory_iterator(cfg.journal_dir())) {
            n += f.path().filename().string().rfind(format::kJournalPrefix, 0) == 0;
        }
        return n;
    }
    uint64_t covered() const { return *shm::Journal::checkpoint_covered(cfg.journal_dir()); }
    uint64_t tail() { return shm::load_word(store->index().header().journal_tail); }
    std::map<std::string, std::string> holders() {
        std::map<std::string, std::string> out;  // address -> container
        auto d = dump(*store);
        EXPECT_TRUE(d);
        for (const auto& s : d->slots) {
            if (s.state == "allocated") out[s.address.to_string()] = s.container_id;
        }
        return out;
    }
    // Publishes an intent as an appender that has read the tail and not yet reserved would.
    void publish_intent(const shm::LeaseHandle& h, uint64_t seen_tail) {
        shm::store_word(store->index().leases().intent_word(h.index),
                        shm::LeaseTable::make_intent(h.gen16(), seen_tail),
                        std::memory_order_seq_cst);
    }

    testing::TempDir dir;
    NetworkConfig cfg;
    std::unique_ptr<NetworkStore> store;
    std::unique_ptr<Allocator> alloc;
};

TEST_F(JournalCompaction, TheJournalStaysBoundedAndARebuildKeepsEveryAllocation) {
    for (int i = 0; i < 40; ++i)
        ASSERT_TRUE(alloc->add(testing::add_request("keep" + std::to_string(i))));
    // 2 records per pair: about 6 segments, so several compactions.
    churn(12'000);
    EXPECT_GE(covered(), 4 * kJournalRecordsPerSegment);
    EXPECT_LT(tail() - covered(), (cfg.journal_max_segments + 1) * kJournalRecordsPerSegment);
    const auto before = holders();
    ASSERT_EQ(before.size(), 40u);

    std::filesystem::remove_all(cfg.run_dir);
    open();
    EXPECT_TRUE(store->creation().rebuilt);
    EXPECT_EQ(holders(), before);
    testing::expect_verify_clean(*store);
    // Records written after the rebuild win over the checkpoint's (generations moved past).
    ASSERT_TRUE(alloc->del({"keep0", "eth0"}));
    std::filesystem::remove_all(cfg.run_dir);
    open();
    EXPECT_EQ(holders().size(), 39u);
}

TEST_F(JournalCompaction, ARecordReservedButNotYetWrittenHoldsTheBoundary) {
    churn(100);
    // An appender (alive: this process) that read the tail and is about to reserve from it.
    auto lease = store->index().leases().acquire(store->self());
    ASSERT_TRUE(lease);
    const uint64_t seen = tail();
    publish_intent(*lease, seen);
    churn(3 * int(kJournalRecordsPerSegment) / 2, false);  // three more segments
    EXPECT_LE(covered(), seen) << "a segment the appender will write into was dropped";
    EXPECT_EQ(compaction_boundary(*store),
              seen / kJournalRecordsPerSegment * kJournalRecordsPerSegment);

    // Written and cleared: the next compaction goes past it.
    shm::store_word(store->index().leases().intent_word(lease->index), 0);
    auto done = compact_journal(*store, 1);
    ASSERT_TRUE(done) << done.error().msg;
    ASSERT_TRUE(*done);
    EXPECT_GT(covered(), seen);
    store->index().leases().release(*lease);
}

TEST_F(JournalCompaction, AnIntentOfAnEarlierHolderOfTheLeaseIsIgnored) {
    auto& leases = store->index().leases();
    auto first = leases.acquire(store->self());
    ASSERT_TRUE(first);
    publish_intent(*first, 0);
    leases.release(*first);  // finished without clearing (as if reaped after dying)
    churn(3 * int(kJournalRecordsPerSegment) / 2);
    EXPECT_GT(covered(), 0u);
}

TEST_F(JournalCompaction, ADeadAppendersIntentDoesNotHoldTheBoundary) {
    // An appender in its own process publishes its intent and dies (its lease lock goes with it).
    const uint64_t seen = tail();
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        auto s = open_network(cfg, shm::current_process());
        if (!s) ::_exit(1);
        auto lease = (*s)->index().leases().acquire((*s)->self());
        if (!lease) ::_exit(1);
        shm::store_word((*s)->index().leases().intent_word(lease->index),
                        shm::LeaseTable::make_intent(lease->gen16(), seen));
        ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_EQ(WEXITSTATUS(status), 0);
    churn(3 * int(kJournalRecordsPerSegment) / 2);
    EXPECT_GT(covered(), seen);
}

// A holder judged dead while it still runs (kernel-held liveness rules it out, but the intent
// word is shared) never clears, on finishing its append, the journal intent of the lease's next
// holder: a compactor would then drop the segment that holder is writing into. The intent is
// cleared only by a CAS from the value its writer stored.
TEST_F(JournalCompaction, AZombieNeverClearsTheNextHoldersIntent) {
    churn(100);
    auto& leases = store->index().leases();
    auto zombie = leases.acquire(store->self());
    ASSERT_TRUE(zombie);
    const uint16_t zombie_gen = zombie->gen16();
    leases.release(*zombie);  // freed under it, as a reaper would
    auto next = leases.acquire(store->self());
    ASSERT_TRUE(next);
    ASSERT_EQ(next->index, zombie->index) << "the test needs the same lease again";
    const uint64_t seen = tail();
    publish_intent(*next, seen);
    // The zombie appends with its own (old) generation and clears "its" intent on the way out.
    std::vector<format::JournalRecord> recs{
        make_record(format::JournalOp::kRollback, *IpAddress::parse("10.70.3.250"), 22, 0, 1,
                    Fingerprint{}, AttachmentText{}, store->boot_id(), 1)};
    uint64_t& tail_word = store->index().header().journal_tail;
    auto appended =
        store->journal().append(tail_word, recs,
                                shm::JournalIntent{&leases.intent_word(next->index), zombie_gen,
                                                   &leases.word_ref(next->index)});
    ASSERT_FALSE(appended) << "the zombie appended on a lease that is no longer its";
    EXPECT_EQ(appended.error().code, Code::kTryAgainLater);
    EXPECT_TRUE(leases.intent_of(next->index, next->word).has_value())
        << "the zombie cleared the next holder's intent";
    EXPECT_LE(compaction_boundary(*store), seen);
    leases.release(*next);
}

// Threads with their own mappings (as processes have) append and compact at once; then a rebuild
// from what the journal holds gives back exactly the live allocations. Built with TSan in CI.
TEST_F(JournalCompaction, ConcurrentAppendersAndCompactorsLoseNothing) {
    cfg.journal_max_segments = 1;
    constexpr int kThreads = 4;
    constexpr int kRounds = 1500;
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            auto s = testing::open_store(cfg);
            Allocator a(*s, cfg);
            for (int r = 0; r < kRounds; ++r) {
                const std::string keep = "t" + std::to_string(t) + "k" + std::to_string(r);
                // Every tenth attachment stays; the rest come and go.
                if (!a.add(testing::add_request(keep))) ++failures;
                compact_journal_if_due(*s);
                if (r % 10 != 0 && !a.del({keep, "eth0"})) ++failures;
                compact_journal_if_due(*s);
            }
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_GT(covered(), 0u);
    const auto before = holders();
    EXPECT_EQ(before.size(), size_t(kThreads * kRounds / 10));
    std::filesystem::remove_all(cfg.run_dir);
    open();
    EXPECT_EQ(holders(), before);
    testing::expect_verify_clean(*store);
}

}  // namespace
}  // namespace shmipam::engine
