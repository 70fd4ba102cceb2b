// The journal's writing side: appends (reserve, write, sync), segment creation, compaction.
// Reading (listing, scans): journal_scan.cpp.
#include "shm/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "base/fault_point.h"
#include "shm/atomic_word.h"
#include "shm/crc32c.h"
#include "shm/file_system.h"
#include "shm/lease_table.h"
#include "shm/mapped_file.h"

namespace shmipam::shm {

using format::JournalRecord;
using format::kJournalRecordsPerSegment;
using format::kJournalSegmentBytes;

namespace {

// Makes a new file's blocks durable (its name is the directory's business: sync_dir).
Status fsync_file(const std::string& path) {
    FileSystem& fs = file_system();
    const int fd = fs.open(path, O_RDONLY);
    if (fd < 0) return io_error("cannot open", path);
    const int rc = fs.fsync(fd);
    const int err = errno;
    fs.close(fd);
    errno = err;
    if (rc != 0) return io_error("cannot fsync", path);
    return Ok{};
}

Status fsync_dir(const std::string& dir) {
    if (file_system().sync_dir(dir) != 0) return io_error("cannot fsync directory", dir);
    return Ok{};
}

}  // namespace

Journal::~Journal() {
    for (auto& [seg, fd] : fds_) file_system().close(fd);
}

std::string Journal::segment_name(uint64_t segment) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%s%08llu", format::kJournalPrefix, (unsigned long long)segment);
    return buf;
}

void Journal::seal(JournalRecord& r) {
    r.crc = crc32c(reinterpret_cast<const uint8_t*>(&r) + 4, sizeof r - 4);
}

std::string Journal::record_damage(const JournalRecord& r, uint64_t expected_sequence) {
    // The CRC first: a flipped byte anywhere shows as a CRC mismatch, not as a bad field.
    if (r.crc != crc32c(reinterpret_cast<const uint8_t*>(&r) + 4, sizeof r - 4)) {
        return "crc mismatch";
    }
    if (r.op < uint8_t(format::JournalOp::kAlloc) || r.op > uint8_t(format::JournalOp::kRollback)) {
        return "unknown op " + std::to_string(r.op);
    }
    if (r.family != 4 && r.family != 6) return "unknown family " + std::to_string(r.family);
    if (r.sequence != expected_sequence) {
        return "sequence " + std::to_string(r.sequence) + " where " +
               std::to_string(expected_sequence) + " belongs";
    }
    return "";
}

bool Journal::record_valid(const JournalRecord& r, uint64_t expected_sequence) {
    return record_damage(r, expected_sequence).empty();
}

namespace {

// The names-durable word (format.h, journal_names_durable): a window of 24 segments.
constexpr unsigned kNameWindowBits = 24;
constexpr uint64_t kNameWindowMask = (uint64_t{1} << kNameWindowBits) - 1;

bool name_marked_durable(uint64_t word, uint64_t segment) {
    const uint64_t first = word >> kNameWindowBits;
    return segment >= first && segment - first < kNameWindowBits &&
           ((word >> (segment - first)) & 1) != 0;
}

// `word` with `segment` marked, the window slid forward when it is past it; unchanged for a
// segment before the window (its appenders sync again: slower, never wrong).
uint64_t with_name_marked(uint64_t word, uint64_t segment) {
    uint64_t first = word >> kNameWindowBits;
    uint64_t bits = word & kNameWindowMask;
    if (segment < first) return word;
    if (segment - first >= kNameWindowBits) {
        const uint64_t new_first = segment - (kNameWindowBits - 1);
        const uint64_t shift = new_first - first;
        bits = shift >= kNameWindowBits ? 0 : bits >> shift;
        first = new_first;
    }
    return (first << kNameWindowBits) | bits | (uint64_t{1} << (segment - first));
}

}  // namespace

Expected<int> Journal::segment_fd(uint64_t segment) {
    if (auto it = fds_.find(segment); it != fds_.end()) return it->second;
    const std::string name = segment_name(segment);
    const std::string path = dir_ + "/" + name;
    FileSystem& fs = file_system();
    int fd = fs.open(path, O_RDWR);
    bool name_durable = false;
    if (fd < 0 && errno == ENOENT) {
        // A new segment: built aside fully allocated and zero-filled, linked into place (racing
        // creators agree), and with durability, its blocks and its name made durable.
        auto made = create_published(dir_, name, kJournalSegmentBytes,
                                     [](std::span<std::byte>) -> Status { return Ok{}; });
        if (!made) return made.error();
        if (*made == Publish::kCreated && mode_ != SyncMode::kNone) {
            if (auto st = fsync_file(path); !st) return st.error();
            if (auto st = fsync_dir(dir_); !st) return st.error();
            name_durable = true;
        }
        fd = fs.open(path, O_RDWR);
    }
    if (fd < 0) return io_error("cannot open journal segment", path);
    // A segment someone else created: its creator may have died between link() and syncing
    // the directory, and a synced record in a file whose name is lost is lost. Once per segment
    // (the shared word says, per segment, when someone already did it: a directory sync covers
    // only the names linked before it, so one segment's sync says nothing of another's).
    if (mode_ != SyncMode::kNone && !name_durable &&
        (names_durable_ == nullptr || !name_marked_durable(load_word(*names_durable_), segment))) {
        if (auto st = fsync_dir(dir_); !st) {
            fs.close(fd);
            return st.error();
        }
        name_durable = true;
    }
    if (name_durable && names_durable_ != nullptr) {
        uint64_t seen = load_word(*names_durable_);
        while (!name_marked_durable(seen, segment) &&
               !cas_word(*names_durable_, seen, with_name_marked(seen, segment))) {
        }
    }
    fds_[segment] = fd;
    return fd;
}

Status Journal::append(uint64_t& tail_word, std::span<JournalRecord> records,
                       const JournalIntent& intent) {
    reached_check_ = false;
    if (records.empty()) return Ok{};
    std::atomic_ref<uint64_t> tail(tail_word);
    // The intent is a Dekker handshake with the compactor (both sides seq_cst): either it sees
    // our intent, or our fetch-add comes after its read of the tail, so every record we reserve
    // is at or past the boundary it compacts below.
    // Cleared by a CAS from the value we stored: a holder judged dead while it still ran (it
    // cannot be, with kernel-held leases, but the word is shared) never clears the intent of
    // the lease's next holder, so a compactor never drops a segment that holder is writing into.
    struct IntentScope {
        uint64_t* word = nullptr;
        uint64_t stored = 0;
        ~IntentScope() {
            if (word != nullptr) {
                std::atomic_ref<uint64_t>(*word).compare_exchange_strong(stored, 0,
                                                                         std::memory_order_seq_cst);
            }
        }
    } scope;
    if (intent.word != nullptr) {
        const uint64_t seen = tail.load(std::memory_order_seq_cst);
        const uint64_t mine = LeaseTable::make_intent(intent.lease_gen, seen);
        std::atomic_ref<uint64_t> word(*intent.word);
        uint64_t cur = word.load(std::memory_order_seq_cst);
        for (;;) {
            if (intent.lease_word != nullptr &&
                LeaseTable::gen_of(std::atomic_ref<const uint64_t>(*intent.lease_word)
                                       .load(std::memory_order_seq_cst)) != intent.lease_gen) {
                return make_error(Code::kTryAgainLater,
                                  "this invocation's lease was freed under it: nothing appended");
            }
            if (word.compare_exchange_strong(cur, mine, std::memory_order_seq_cst)) break;
        }
        scope.stored = mine;
        scope.word = intent.word;
        SHMIPAM_FAULT("journal.after_intent");
    }
    const uint64_t first = tail.fetch_add(records.size(), std::memory_order_seq_cst);
    const uint64_t check =
        first / kJournalRecordsPerSegment * kJournalRecordsPerSegment + kCompactionCheckOffset;
    reached_check_ = first <= check && check < first + records.size();
    for (size_t i = 0; i < records.size(); ++i) {
        records[i].sequence = first + i;
        records[i].epoch = epoch_;
        seal(records[i]);
    }
    SHMIPAM_FAULT("journal.after_reserve");
    // Contiguous records of one segment go in one write and one sync. An append that fails
    // part way (its second segment cannot be created on a full disk) takes back what it wrote:
    // zeros over its own slots (no new space needed), so that the journal does not keep half
    // of a claim its caller is about to roll back, with no room left to journal the rollback.
    struct Written {
        int fd;
        off_t off;
        size_t bytes;
    };
    std::vector<Written> written;
    auto take_back = [&](Error e) -> Status {
        for (const Written& w : written) {
            const std::vector<char> zeros(w.bytes, 0);
            (void)file_system().pwrite(w.fd, zeros.data(), w.bytes, w.off);
        }
        return e;
    };
    size_t i = 0;
    while (i < records.size()) {
        const uint64_t seg = records[i].sequence / kJournalRecordsPerSegment;
        size_t j = i + 1;
        while (j < records.size() && records[j].sequence / kJournalRecordsPerSegment == seg) ++j;
        auto fd = segment_fd(seg);
        if (!fd) return take_back(fd.error());
        const off_t off =
            off_t((records[i].sequence % kJournalRecordsPerSegment) * sizeof(JournalRecord));
        const size_t bytes = (j - i) * sizeof(JournalRecord);
        if (auto st = write_durably(*fd, &records[i], bytes, off, mode_, &used_); !st) {
            return take_back(st.error());
        }
        written.push_back({*fd, off, bytes});
        i = j;
    }
    SHMIPAM_FAULT("journal.after_sync");
    return Ok{};
}

Status Journal::compact(const std::string& dir, uint64_t covered,
                        const std::vector<JournalRecord>& records, bool sync, uint64_t epoch) {
    if (covered == 0) return Ok{};
    const std::string name = checkpoint_name(covered, epoch);
    const size_t bytes = std::max<size_t>(1, records.size()) * sizeof(JournalRecord);
    auto made = create_published(dir, name, bytes, [&](std::span<std::byte> mem) -> Status {
        // An empty checkpoint (a new network's) is one zeroed record, which readers skip.
        if (!records.empty()) {
            std::memcpy(mem.data(), records.data(), records.size() * sizeof(JournalRecord));
        }
        return Ok{};
    });
    if (!made) return made.error();
    if (sync) {
        if (auto st = fsync_file(dir + "/" + name); !st) return st;
        if (auto st = fsync_dir(dir); !st) return st;
    }
    SHMIPAM_FAULT("checkpoint.after_publish");
    auto listing = list(dir);
    if (!listing) return listing.error();
    // A failed unlink leaves an extra file, which the next compaction removes: not an error.
    for (uint64_t seg : listing->segments) {
        if ((seg + 1) * kJournalRecordsPerSegment <= covered) {
            file_system().unlink(dir + "/" + segment_name(seg));
        }
    }
    for (const Checkpoint& c : listing->checkpoints) {
        if (c.covered < covered) file_system().unlink(dir + "/" + c.name);
    }
    return Ok{};
}

}  // namespace shmipam::shm
