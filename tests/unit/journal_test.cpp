#include "shm/journal.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "engine/state/journal_records.h"
#include "shm/crc32c.h"
#include "tests/support/faulty_file_system.h"
#include "tests/support/temp_dir.h"

namespace shmipam {
namespace {

using format::JournalOp;
using format::JournalRecord;

JournalRecord rec(const std::string& addr, uint32_t gen, JournalOp op = JournalOp::kAlloc) {
    return engine::make_record(op, *engine::IpAddress::parse(addr), 24, 0, gen,
                               engine::fingerprint("c", "eth0"), {"c", "eth0", "ns/p", 0, 1}, {},
                               123);
}

TEST(Journal, AppendsAreReadBackWithTheirSequence) {
    testing::TempDir dir;
    for (auto mode : {shm::SyncMode::kNone, shm::SyncMode::kFdatasync, shm::SyncMode::kIoUring}) {
        std::filesystem::remove_all(dir.sub("j"));
        std::filesystem::create_directories(dir.sub("j"));
        shm::Journal j(dir.sub("j"), mode);
        uint64_t tail = 0;
        std::vector<JournalRecord> a{rec("10.0.0.2", 1), rec("10.0.0.3", 1)};
        ASSERT_TRUE(j.append(tail, a, {}));
        std::vector<JournalRecord> b{rec("10.0.0.2", 3, JournalOp::kRelease)};
        ASSERT_TRUE(j.append(tail, b, {}));
        EXPECT_EQ(tail, 3u);
        auto scan = shm::Journal::scan(dir.sub("j"));
        ASSERT_TRUE(scan);
        ASSERT_EQ(scan->records.size(), 3u);
        EXPECT_EQ(scan->records[2].sequence, 2u);
        EXPECT_EQ(scan->records[2].op, uint8_t(JournalOp::kRelease));
        EXPECT_EQ(scan->next_sequence, 3u);
        EXPECT_EQ(scan->invalid, 0u);
        if (mode == shm::SyncMode::kIoUring) {  // or its fallback where io_uring is refused
            EXPECT_NE(j.last_used(), shm::SyncMode::kNone);
        } else {
            EXPECT_EQ(j.last_used(), mode);
        }
    }
}

TEST(Journal, SegmentsArePreallocatedAndRecordsCrossThem) {
    testing::TempDir dir;
    shm::Journal j(dir.path(), shm::SyncMode::kNone);
    uint64_t tail = format::kJournalRecordsPerSegment - 1;  // the next append straddles two
    std::vector<JournalRecord> a{rec("10.0.0.2", 1), rec("10.0.0.3", 1)};
    ASSERT_TRUE(j.append(tail, a, {}));
    const auto s0 = dir.sub(shm::Journal::segment_name(0));
    const auto s1 = dir.sub(shm::Journal::segment_name(1));
    EXPECT_EQ(std::filesystem::file_size(s0), format::kJournalSegmentBytes);
    EXPECT_EQ(std::filesystem::file_size(s1), format::kJournalSegmentBytes);
    auto scan = shm::Journal::scan(dir.path());
    ASSERT_EQ(scan->records.size(), 2u);
    EXPECT_EQ(scan->next_sequence, format::kJournalRecordsPerSegment + 1);
}

TEST(Journal, DurablePartNeedNotBeAPrefixAndDamageIsSkipped) {
    testing::TempDir dir;
    shm::Journal j(dir.path(), shm::SyncMode::kNone);
    uint64_t tail = 0;
    std::vector<JournalRecord> a{rec("10.0.0.2", 1), rec("10.0.0.3", 1), rec("10.0.0.4", 1),
                                 rec("10.0.0.5", 1)};
    ASSERT_TRUE(j.append(tail, a, {}));
    // Record 1 never made it (a hole), record 2 is torn (a flipped bit).
    const std::string seg = dir.sub(shm::Journal::segment_name(0));
    int fd = ::open(seg.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    JournalRecord zero{};
    ASSERT_EQ(::pwrite(fd, &zero, sizeof zero, sizeof zero), ssize_t(sizeof zero));
    uint8_t byte = 0;
    ASSERT_EQ(::pread(fd, &byte, 1, 2 * sizeof zero + 100), 1);
    byte ^= 0x10;
    ASSERT_EQ(::pwrite(fd, &byte, 1, 2 * sizeof zero + 100), 1);
    ::close(fd);
    auto scan = shm::Journal::scan(dir.path());
    ASSERT_TRUE(scan);
    ASSERT_EQ(scan->records.size(), 2u);
    EXPECT_EQ(scan->records[0].sequence, 0u);
    EXPECT_EQ(scan->records[1].sequence, 3u) << "records after a hole are still read";
    EXPECT_EQ(scan->invalid, 1u);
    EXPECT_EQ(scan->next_sequence, 4u);
}

TEST(Journal, ARecordInTheWrongPlaceIsRejected) {
    JournalRecord r = rec("10.0.0.2", 1);
    r.sequence = 5;
    shm::Journal::seal(r);
    EXPECT_TRUE(shm::Journal::record_valid(r, 5));
    EXPECT_FALSE(shm::Journal::record_valid(r, 6));
}

TEST(Journal, ForeignAndTruncatedSegmentsDoNotBreakTheScan) {
    testing::TempDir dir;
    testing::write_file(dir.sub(shm::Journal::segment_name(0)), std::string(5000, 'x'));
    testing::write_file(dir.sub(shm::Journal::segment_name(1)), "");
    testing::write_file(dir.sub("shmipam-journal.notanumber"), "x");
    auto scan = shm::Journal::scan(dir.path());
    ASSERT_TRUE(scan);
    EXPECT_TRUE(scan->records.empty());
    EXPECT_GT(scan->invalid, 0u);
}

TEST(Journal, AnUnreadableSegmentIsReportedAndSkippedOnlyWhenAReporterAsks) {
    testing::TempDir dir;
    shm::Journal j(dir.path(), shm::SyncMode::kNone);
    uint64_t tail = format::kJournalRecordsPerSegment - 1;  // one record in each of 0 and 1
    std::vector<JournalRecord> a{rec("10.0.0.2", 1), rec("10.0.0.3", 1)};
    ASSERT_TRUE(j.append(tail, a, {}));
    // Segment 2 exists by name but cannot be read (a directory where a file should be).
    std::filesystem::create_directory(dir.sub(shm::Journal::segment_name(2)));

    auto strict = shm::Journal::scan(dir.path());
    ASSERT_FALSE(strict) << "a rebuild must not go on without a file it cannot read";
    EXPECT_EQ(strict.error().code, Code::kIo);

    std::vector<shm::Journal::FileDamage> damage;
    auto lenient = shm::Journal::scan(
        dir.path(), UINT64_MAX, [&](const shm::Journal::FileDamage& d) { damage.push_back(d); });
    ASSERT_TRUE(lenient) << lenient.error().msg;
    EXPECT_EQ(lenient->records.size(), 2u) << "the readable segments are still read";
    ASSERT_EQ(damage.size(), 1u);
    EXPECT_EQ(damage[0].path, dir.sub(shm::Journal::segment_name(2)));
    EXPECT_FALSE(damage[0].why.empty());
}

}  // namespace
}  // namespace shmipam

namespace shmipam {
namespace {

// The journal's half of "a late write of a retired index never overwrites a record nor is
// replayed": a record a retired index's writer writes late is never read in place of the state
// a rebuild checkpointed. Below the checkpoint it is a stray unless the checkpoint already
// superseded it; past it, a record of another epoch is a stray.
TEST(Journal, AStrayOfARetiredIndexIsNeverReplayed) {
    testing::TempDir dir;
    shm::Journal old_index(dir.path(), shm::SyncMode::kNone);
    old_index.set_epoch(0x1111);
    uint64_t tail = 0;
    std::vector<JournalRecord> a{rec("10.0.0.2", 1)};
    ASSERT_TRUE(old_index.append(tail, a, {}));
    // A rebuild (epoch 0x2222) checkpoints what it read and appends from a segment further on.
    auto scan = shm::Journal::scan(dir.path());
    ASSERT_TRUE(scan);
    const uint64_t start = shm::Journal::rebuilt_tail(*scan);
    EXPECT_EQ(start, 2 * format::kJournalRecordsPerSegment) << "a whole segment past segment 0";
    ASSERT_TRUE(shm::Journal::compact(
        dir.path(), start, shm::Journal::newest_per_address(scan->records), false, 0x2222));
    shm::Journal rebuilt(dir.path(), shm::SyncMode::kNone);
    rebuilt.set_epoch(0x2222);
    uint64_t new_tail = start;
    std::vector<JournalRecord> b{rec("10.0.0.3", 1)};
    ASSERT_TRUE(rebuilt.append(new_tail, b, {}));
    // The old index's writers, late: one that reserved before the rebuild writes below the
    // checkpoint (opening segment 0 anew, it recreates it; one that had it open writes into
    // the removed file), and one far past it, as if its reservations had run that far.
    shm::Journal reopened(dir.path(), shm::SyncMode::kNone);
    reopened.set_epoch(0x1111);
    uint64_t late = 1;
    std::vector<JournalRecord> stray{rec("10.0.0.3", 9)};
    ASSERT_TRUE(reopened.append(late, stray, {}));
    uint64_t far = start + 10;
    std::vector<JournalRecord> far_stray{rec("10.0.0.4", 9)};
    ASSERT_TRUE(old_index.append(far, far_stray, {}));

    auto after = shm::Journal::scan(dir.path(), UINT64_MAX, [](const auto&) {});
    ASSERT_TRUE(after) << after.error().msg;
    EXPECT_EQ(after->strays, 2u);
    const auto newest = shm::Journal::newest_per_address(after->records);
    ASSERT_EQ(newest.size(), 2u);
    EXPECT_EQ(newest[0].address[15], 2);
    EXPECT_EQ(newest[1].address[15], 3);
    EXPECT_EQ(newest[1].slot_gen, 1u) << "the stray's generation 9 won";
    EXPECT_EQ(newest[1].epoch, 0x2222u);
}

// One segment's directory sync never vouches for another segment's name. B's sync (for segment
// 2, which B created) runs before C links segment 1; were the names-durable word a high-water
// mark, B would raise it past 1, A, then appending into segment 1, would skip the directory sync
// and answer, and a power cut would take segment 1's name with A's record. The word marks
// segments one by one.
TEST(Journal, ADirectorySyncForOneSegmentNeverVouchesForAnotherSegmentsName) {
    testing::TempDir dir;
    testing::InstalledFaultyFs faulty{dir.sub("kept")};
    const std::string j = dir.sub("journal");
    std::filesystem::create_directories(j);
    ASSERT_EQ(faulty.fs.sync_dir(j), 0);  // the journal directory itself is durable
    uint64_t names_durable = 0;           // the index header's shared word
    const uint64_t seg = format::kJournalRecordsPerSegment;
    // B creates segment 2 and syncs its name.
    shm::Journal b(j, shm::SyncMode::kFdatasync);
    b.set_names_durable_word(&names_durable);
    uint64_t tail_b = 2 * seg;
    std::vector<JournalRecord> rb{rec("10.0.0.2", 1)};
    ASSERT_TRUE(b.append(tail_b, rb, {}));
    // C links segment 1 and dies before syncing the directory (no sync at all, here).
    shm::Journal c(j, shm::SyncMode::kNone);
    uint64_t tail_c = seg;
    std::vector<JournalRecord> rc{rec("10.0.0.3", 1)};
    ASSERT_TRUE(c.append(tail_c, rc, {}));
    // A appends into segment 1 and answers.
    shm::Journal a(j, shm::SyncMode::kFdatasync);
    a.set_names_durable_word(&names_durable);
    uint64_t tail_a = seg + 1;
    std::vector<JournalRecord> ra{rec("10.0.0.4", 1)};
    ASSERT_TRUE(a.append(tail_a, ra, {}));
    faulty.fs.drop_unsynced();  // the power goes
    auto scan = shm::Journal::scan(j);
    ASSERT_TRUE(scan) << scan.error().msg;
    bool a_survived = false;
    for (const auto& r : scan->records) a_survived = a_survived || r.sequence == seg + 1;
    EXPECT_TRUE(a_survived) << "A's answered record was lost with segment 1's name";
}

TEST(Crc32c, MatchesTheStandardCheckValues) {
    // RFC 3720 (iSCSI) test vectors and the common "123456789" check value.
    EXPECT_EQ(shm::crc32c("123456789", 9), 0xE3069283u);
    const std::string zeros(32, '\0');
    EXPECT_EQ(shm::crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
    const std::string ones(32, '\xff');
    EXPECT_EQ(shm::crc32c(ones.data(), ones.size()), 0x62A8AB43u);
    EXPECT_EQ(shm::crc32c("", 0), 0u);
}

}  // namespace
}  // namespace shmipam
