// The network's journal: records of the transitions that must outlive the arena (format.h).
// Appends reserve record numbers lock-free (fetch-add on the index header's tail), write them
// into preallocated segments, and make them durable per the sync mode before returning.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "shm/durability.h"
#include "shm/format.h"

namespace shmipam::shm {

// Where an appender publishes its intent (the lease side's journal_intent word, format.h), so
// that a concurrent compactor never drops a segment it is about to write into. Only an aside
// index nobody else can see appends without one.
struct JournalIntent {
    uint64_t* word = nullptr;
    uint16_t lease_gen = 0;
    // The lease word itself: an appender whose lease is no longer at its generation (freed
    // under it) never publishes over the next holder's intent; the append answers 11.
    const uint64_t* lease_word = nullptr;
};

class Journal {
  public:
    Journal(std::string dir, SyncMode mode) : dir_(std::move(dir)), mode_(mode) {}
    ~Journal();
    Journal(const Journal&) = delete;
    Journal& operator=(const Journal&) = delete;

    // Fills in sequence and crc, writes, syncs. A segment that does not exist yet is created
    // (fully allocated, made durable with its directory entry): kIo when that fails (full or
    // read-only filesystem); appends into existing segments need no new space.
    // The intent is published before the reservation and cleared once the records are written.
    Status append(uint64_t& tail_word, std::span<format::JournalRecord> records,
                  const JournalIntent& intent);
    // Whether the last append reserved the record a quarter into a segment: its caller is the
    // one to consider compacting (once per segment, whoever gets there). Not the first record:
    // appenders a moment behind would still hold intents in the previous segment, and the
    // compaction boundary could not reach it.
    static constexpr uint64_t kCompactionCheckOffset = format::kJournalRecordsPerSegment / 4;
    bool reached_compaction_check() const { return reached_check_; }

    // The shared word saying which segments' names are durable (format.h); without one, every
    // open of an existing segment for a durable append syncs the directory.
    void set_names_durable_word(uint64_t* word) { names_durable_ = word; }
    // The epoch of the index this journal appends for: stamped into every record.
    void set_epoch(uint64_t epoch) { epoch_ = epoch; }
    uint64_t epoch() const { return epoch_; }

    SyncMode mode() const { return mode_; }
    SyncMode last_used() const { return used_; }
    const std::string& dir() const { return dir_; }

    struct ScanResult {
        std::vector<format::JournalRecord> records;  // every valid record, in sequence order
        uint64_t next_sequence = 0;                  // one past the highest valid record
        uint64_t invalid = 0;                        // written-looking slots that failed checks
        uint64_t segments = 0;
        uint64_t segment_end = 0;  // one past the highest segment file's number (0: none)
        uint64_t covered = 0;      // what the newest checkpoint covers (0: none)
        uint64_t epoch = 0;        // the newest checkpoint's epoch (0: none or unknown)
        // Valid records a retired index's writer wrote late: below the checkpoint's coverage
        // (not in it; counted only when a reporter is given), or past it with another epoch.
        // Skipped; verify counts them.
        uint64_t strays = 0;
    };
    // Where a rebuilt index starts appending: a whole segment past the first segment nobody has
    // created (nor covered), so that no sequence a writer of the retired index reserved (and may
    // still write) is ever handed out again: such a writer's late pwrite lands where no live
    // record is, never over one. A retired index's writers hold at most one append each, far
    // fewer than a segment's records.
    static uint64_t rebuilt_tail(const ScanResult& scan);
    // A journal file the scan could not read (LevelDB's log::Reader::Reporter).
    struct FileDamage {
        std::string path;
        std::string why;
    };
    using DamageReporter = std::function<void(const FileDamage&)>;
    // Reads the newest checkpoint and every segment of the journal in dir (no journal: empty
    // result). A segment removed by a concurrent compaction makes it start over.
    // Records at or past `below` (and segments wholly past it) are not read. Damaged records
    // are skipped and counted (`invalid`). A file that cannot be read at all is given to
    // `report` and skipped, and the scan goes on (verify, inspection); without a reporter the
    // scan fails on it (a rebuild or a compaction: going on without the file could lose an
    // allocation only it records, and so give that address to a second owner).
    static Expected<ScanResult> scan(const std::string& dir, uint64_t below = UINT64_MAX,
                                     const DamageReporter& report = nullptr);
    // The winning record of every address (highest slot generation, then sequence; never
    // journal order), ordered by family and address.
    static std::vector<format::JournalRecord> newest_per_address(
        const std::vector<format::JournalRecord>& records);
    // What a checkpoint covers now (0: none); kIo when the directory cannot be read.
    static Expected<uint64_t> checkpoint_covered(const std::string& dir);

    // Compaction: writes `records` (the newest per address among [0, covered)) as a checkpoint,
    // aside then published, durable when `sync`; then drops segments wholly below `covered` and
    // older checkpoints. A crash anywhere leaves a readable journal (extra files at worst).
    // `epoch` is the index that appends past `covered` (named in the checkpoint's file name).
    static Status compact(const std::string& dir, uint64_t covered,
                          const std::vector<format::JournalRecord>& records, bool sync,
                          uint64_t epoch);

    // The segment numbers and checkpoints (by what they cover) in dir, each ascending; empty
    // when there is no journal. kIo when the directory cannot be read.
    struct Checkpoint {
        uint64_t covered = 0;
        uint64_t epoch = 0;  // 0: a version 2 name, without one
        std::string name;
    };
    struct Listing {
        std::vector<uint64_t> segments;
        std::vector<Checkpoint> checkpoints;  // by coverage
    };
    static Expected<Listing> list(const std::string& dir);

    static std::string segment_name(uint64_t segment);
    static std::string checkpoint_name(uint64_t covered, uint64_t epoch);
    // Why a record read at `expected_sequence` is not valid ("" when it is): the CRC, the op,
    // the family, the sequence, checked in that order. shmipamctl dump-file shows it.
    static std::string record_damage(const format::JournalRecord& r, uint64_t expected_sequence);
    static bool record_valid(const format::JournalRecord& r, uint64_t expected_sequence);
    static void seal(format::JournalRecord& r);  // computes the crc

  private:
    Expected<int> segment_fd(uint64_t segment);

    std::string dir_;
    SyncMode mode_;
    SyncMode used_ = SyncMode::kNone;
    bool reached_check_ = false;
    uint64_t* names_durable_ = nullptr;
    uint64_t epoch_ = 0;
    std::map<uint64_t, int> fds_;
};

}  // namespace shmipam::shm
