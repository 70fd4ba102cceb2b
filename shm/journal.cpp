#include "shm/journal.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <optional>

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

bool all_zero(const JournalRecord& r) {
    auto* p = reinterpret_cast<const uint8_t*>(&r);
    return std::all_of(p, p + sizeof r, [](uint8_t b) { return b == 0; });
}

Error io_failure(const std::string& what, const std::string& path) {
    return make_error(Code::kIo, what + " " + path + ": " + std::strerror(errno));
}

// Makes a new file's blocks durable (its name is the directory's business: sync_dir).
Status fsync_file(const std::string& path) {
    FileSystem& fs = file_system();
    const int fd = fs.open(path, O_RDONLY);
    if (fd < 0) return io_failure("cannot open", path);
    const int rc = fs.fsync(fd);
    const int err = errno;
    fs.close(fd);
    errno = err;
    if (rc != 0) return io_failure("cannot fsync", path);
    return Ok{};
}

Status fsync_dir(const std::string& dir) {
    if (file_system().sync_dir(dir) != 0) return io_failure("cannot fsync directory", dir);
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
    if (fd < 0) return io_failure("cannot open journal segment", path);
    // A segment someone else created: its creator may have died between link() and syncing
    // the directory, and a synced record in a file whose name is lost is lost. Once per segment
    // (the shared word says when someone already did it).
    if (mode_ != SyncMode::kNone && !name_durable &&
        (names_durable_ == nullptr || load_word(*names_durable_) <= segment)) {
        if (auto st = fsync_dir(dir_); !st) {
            fs.close(fd);
            return st.error();
        }
        name_durable = true;
    }
    if (name_durable && names_durable_ != nullptr) {
        uint64_t seen = load_word(*names_durable_);
        while (seen <= segment && !cas_word(*names_durable_, seen, segment + 1)) {
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
    struct IntentScope {
        uint64_t* word;
        ~IntentScope() {
            if (word != nullptr)
                std::atomic_ref<uint64_t>(*word).store(0, std::memory_order_release);
        }
    } scope{intent.word};
    if (intent.word != nullptr) {
        const uint64_t seen = tail.load(std::memory_order_seq_cst);
        std::atomic_ref<uint64_t>(*intent.word)
            .store(LeaseTable::make_intent(intent.lease_gen, seen), std::memory_order_seq_cst);
        SHMIPAM_FAULT("journal.after_intent");
    }
    const uint64_t first = tail.fetch_add(records.size(), std::memory_order_seq_cst);
    const uint64_t check =
        first / kJournalRecordsPerSegment * kJournalRecordsPerSegment + kCompactionCheckOffset;
    reached_check_ = first <= check && check < first + records.size();
    for (size_t i = 0; i < records.size(); ++i) {
        records[i].sequence = first + i;
        seal(records[i]);
    }
    SHMIPAM_FAULT("journal.after_reserve");
    // Contiguous records of one segment go in one write and one sync.
    size_t i = 0;
    while (i < records.size()) {
        const uint64_t seg = records[i].sequence / kJournalRecordsPerSegment;
        size_t j = i + 1;
        while (j < records.size() && records[j].sequence / kJournalRecordsPerSegment == seg) ++j;
        auto fd = segment_fd(seg);
        if (!fd) return fd.error();
        const off_t off =
            off_t((records[i].sequence % kJournalRecordsPerSegment) * sizeof(JournalRecord));
        if (auto st = write_durably(*fd, &records[i], (j - i) * sizeof(JournalRecord), off, mode_,
                                    &used_);
            !st) {
            return st;
        }
        i = j;
    }
    SHMIPAM_FAULT("journal.after_sync");
    return Ok{};
}

namespace {

struct Listing {
    std::vector<uint64_t> segments;
    std::vector<uint64_t> checkpoints;  // covered values
};

Expected<Listing> list_journal(const std::string& dir) {
    Listing out;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
        if (errno == ENOENT) return out;
        return make_error(Code::kIo,
                          "cannot read journal directory " + dir + ": " + std::strerror(errno));
    }
    const size_t plen = std::strlen(format::kJournalPrefix);
    const size_t clen = std::strlen(format::kCheckpointPrefix);
    while (dirent* ent = ::readdir(d)) {
        const std::string n = ent->d_name;
        if (n.size() == plen + 8 && n.compare(0, plen, format::kJournalPrefix) == 0 &&
            n.find_first_not_of("0123456789", plen) == std::string::npos) {
            out.segments.push_back(std::stoull(n.substr(plen)));
        } else if (n.size() == clen + 16 && n.compare(0, clen, format::kCheckpointPrefix) == 0 &&
                   n.find_first_not_of("0123456789", clen) == std::string::npos) {
            out.checkpoints.push_back(std::stoull(n.substr(clen)));
        }
    }
    ::closedir(d);
    std::sort(out.segments.begin(), out.segments.end());
    std::sort(out.checkpoints.begin(), out.checkpoints.end());
    return out;
}

std::string checkpoint_name(uint64_t covered) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%016llu", format::kCheckpointPrefix,
                  (unsigned long long)covered);
    return buf;
}

// Reads a whole file; nullopt when it vanished (a concurrent compaction removed it).
Expected<std::optional<std::vector<JournalRecord>>> read_records(const std::string& path,
                                                                 size_t max_records) {
    FileSystem& fs = file_system();
    const int fd = fs.open(path, O_RDONLY);
    if (fd < 0) {
        if (errno == ENOENT) return std::optional<std::vector<JournalRecord>>();
        return io_failure("cannot open", path);
    }
    std::vector<JournalRecord> buf(max_records);
    const ssize_t n = fs.pread(fd, buf.data(), max_records * sizeof(JournalRecord), 0);
    const int err = errno;
    fs.close(fd);
    errno = err;
    if (n < 0) return io_failure("cannot read", path);
    buf.resize(size_t(n) / sizeof(JournalRecord));  // a torn tail record is dropped
    return std::optional<std::vector<JournalRecord>>(std::move(buf));
}

}  // namespace

Expected<uint64_t> Journal::checkpoint_covered(const std::string& dir) {
    auto listing = list_journal(dir);
    if (!listing) return listing.error();
    return listing->checkpoints.empty() ? 0 : listing->checkpoints.back();
}

std::vector<JournalRecord> Journal::newest_per_address(const std::vector<JournalRecord>& records) {
    std::map<std::pair<uint8_t, std::array<uint8_t, 16>>, const JournalRecord*> latest;
    for (const JournalRecord& r : records) {
        std::array<uint8_t, 16> a{};
        std::memcpy(a.data(), r.address, a.size());
        const JournalRecord*& cur = latest[{r.family, a}];
        if (cur == nullptr || r.slot_gen > cur->slot_gen ||
            (r.slot_gen == cur->slot_gen && r.sequence > cur->sequence)) {
            cur = &r;
        }
    }
    std::vector<JournalRecord> out;
    out.reserve(latest.size());
    for (const auto& [key, r] : latest) out.push_back(*r);
    return out;
}

Expected<Journal::ScanResult> Journal::scan(const std::string& dir, uint64_t below,
                                            const DamageReporter& report) {
    for (int attempt = 0; attempt < 5; ++attempt) {
        auto listing = list_journal(dir);
        if (!listing) return listing.error();
        ScanResult out;
        bool vanished = false;
        if (!listing->checkpoints.empty()) {
            const uint64_t covered = listing->checkpoints.back();
            const std::string path = dir + "/" + checkpoint_name(covered);
            struct stat sb {};
            const size_t max =
                ::stat(path.c_str(), &sb) == 0 ? size_t(sb.st_size) / sizeof(JournalRecord) : 0;
            auto recs = read_records(path, max);
            if (!recs && !report) return recs.error();
            if (!recs) {
                report({path, recs.error().msg});
            } else if (!*recs) {
                vanished = true;
            } else {
                for (const JournalRecord& r : **recs) {
                    if (r.sequence < covered && record_valid(r, r.sequence)) {
                        out.records.push_back(r);
                    } else {
                        ++out.invalid;
                    }
                }
                out.next_sequence = covered;
            }
        }
        for (uint64_t seg : listing->segments) {
            if (vanished || seg * kJournalRecordsPerSegment >= below) break;
            const std::string path = dir + "/" + segment_name(seg);
            auto recs = read_records(path, kJournalRecordsPerSegment);
            if (!recs && !report) return recs.error();
            if (!recs) {
                report({path, recs.error().msg});
                continue;
            }
            if (!*recs) {
                vanished = true;
                break;
            }
            ++out.segments;
            // A truncated segment reads short: the slots past its end are simply empty.
            for (uint64_t k = 0; k < (**recs).size(); ++k) {
                const JournalRecord& r = (**recs)[k];
                if (all_zero(r)) continue;
                const uint64_t seq = seg * kJournalRecordsPerSegment + k;
                if (seq >= below) break;
                if (!record_valid(r, seq)) {
                    ++out.invalid;
                    continue;
                }
                out.records.push_back(r);
                out.next_sequence = std::max(out.next_sequence, seq + 1);
            }
        }
        if (!vanished) return out;
    }
    return make_error(Code::kTryAgainLater, "the journal kept changing while it was read", dir);
}

Status Journal::compact(const std::string& dir, uint64_t covered,
                        const std::vector<JournalRecord>& records, bool sync) {
    if (covered < kJournalRecordsPerSegment) return Ok{};  // nothing a checkpoint would free
    const std::string name = checkpoint_name(covered);
    const size_t bytes = std::max<size_t>(1, records.size()) * sizeof(JournalRecord);
    auto made = create_published(dir, name, bytes, [&](std::span<std::byte> mem) -> Status {
        std::memcpy(mem.data(), records.data(), records.size() * sizeof(JournalRecord));
        return Ok{};
    });
    if (!made) return made.error();
    if (sync) {
        if (auto st = fsync_file(dir + "/" + name); !st) return st;
        if (auto st = fsync_dir(dir); !st) return st;
    }
    SHMIPAM_FAULT("checkpoint.after_publish");
    auto listing = list_journal(dir);
    if (!listing) return listing.error();
    // A failed unlink leaves an extra file, which the next compaction removes: not an error.
    for (uint64_t seg : listing->segments) {
        if ((seg + 1) * kJournalRecordsPerSegment <= covered) {
            file_system().unlink(dir + "/" + segment_name(seg));
        }
    }
    for (uint64_t c : listing->checkpoints) {
        if (c < covered) file_system().unlink(dir + "/" + checkpoint_name(c));
    }
    return Ok{};
}

}  // namespace shmipam::shm
