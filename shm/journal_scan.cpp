// The journal's reading side: listing its files, scanning them (with damage reported and
// skipped), the newest record per address. Appends and compaction: journal.cpp.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <tuple>

#include "base/directory.h"
#include "shm/file_system.h"
#include "shm/journal.h"

namespace shmipam::shm {

using format::JournalRecord;
using format::kJournalRecordsPerSegment;

namespace {

// A listed file vanishes only when a compaction drops it behind a newer checkpoint, which the
// next listing shows: a scan that loses this many times in a row is on a journal compacted faster
// than it can be read, and answers 11 for the caller to retry.
constexpr int kScanAttempts = 5;

bool all_digits(const std::string& s, const char* digits) {
    return !s.empty() && s.find_first_not_of(digits) == std::string::npos;
}

// "<16 decimal digits>.<16 hex digits>", or a version 2 name's "<16 decimal digits>".
std::optional<Journal::Checkpoint> parse_checkpoint_name(const std::string& tail) {
    Journal::Checkpoint c;
    const std::string covered = tail.substr(0, 16);
    if (covered.size() != 16 || !all_digits(covered, "0123456789")) return std::nullopt;
    c.covered = std::stoull(covered);
    if (tail.size() == 16) return c;
    const std::string epoch = tail.substr(17);
    if (tail[16] != '.' || epoch.size() != 16 || !all_digits(epoch, "0123456789abcdef")) {
        return std::nullopt;
    }
    c.epoch = std::stoull(epoch, nullptr, 16);
    return c;
}

}  // namespace

Expected<Journal::Listing> Journal::list(const std::string& dir) {
    Listing out;
    const size_t plen = std::strlen(format::kJournalPrefix);
    const size_t clen = std::strlen(format::kCheckpointPrefix);
    const int error = base::for_each_entry(dir, [&](std::string_view name) {
        const std::string n(name);
        if (n.size() == plen + 8 && n.compare(0, plen, format::kJournalPrefix) == 0 &&
            n.find_first_not_of("0123456789", plen) == std::string::npos) {
            out.segments.push_back(std::stoull(n.substr(plen)));
        } else if (n.compare(0, clen, format::kCheckpointPrefix) == 0) {
            if (auto c = parse_checkpoint_name(n.substr(clen))) {
                c->name = n;
                out.checkpoints.push_back(*c);
            }
        }
    });
    if (error == ENOENT) return out;
    if (error != 0) {
        errno = error;
        return io_error("cannot read journal directory", dir);
    }
    std::sort(out.segments.begin(), out.segments.end());
    std::sort(out.checkpoints.begin(), out.checkpoints.end(),
              [](const Checkpoint& a, const Checkpoint& b) {
                  return std::tie(a.covered, a.epoch) < std::tie(b.covered, b.epoch);
              });
    return out;
}

std::string Journal::checkpoint_name(uint64_t covered, uint64_t epoch) {
    char buf[80];
    std::snprintf(buf, sizeof buf, "%s%016llu.%016llx", format::kCheckpointPrefix,
                  (unsigned long long)covered, (unsigned long long)epoch);
    return buf;
}

uint64_t Journal::rebuilt_tail(const ScanResult& scan) {
    const uint64_t first_free =
        std::max(scan.segment_end,
                 (scan.next_sequence + kJournalRecordsPerSegment - 1) / kJournalRecordsPerSegment);
    return (first_free + 1) * kJournalRecordsPerSegment;
}

namespace {

bool all_zero(const JournalRecord& r) {
    auto* p = reinterpret_cast<const uint8_t*>(&r);
    return std::all_of(p, p + sizeof r, [](uint8_t b) { return b == 0; });
}

// Reads a whole file; nullopt when it vanished (a concurrent compaction removed it).
Expected<std::optional<std::vector<JournalRecord>>> read_records(const std::string& path,
                                                                 size_t max_records) {
    FileSystem& fs = file_system();
    const int fd = fs.open(path, O_RDONLY);
    if (fd < 0) {
        if (errno == ENOENT) return std::optional<std::vector<JournalRecord>>();
        return io_error("cannot open", path);
    }
    std::vector<JournalRecord> buf(max_records);
    const ssize_t n = fs.pread(fd, buf.data(), max_records * sizeof(JournalRecord), 0);
    const int err = errno;
    fs.close(fd);
    errno = err;
    if (n < 0) return io_error("cannot read", path);
    buf.resize(size_t(n) / sizeof(JournalRecord));  // a torn tail record is dropped
    return std::optional<std::vector<JournalRecord>>(std::move(buf));
}

}  // namespace

Expected<uint64_t> Journal::checkpoint_covered(const std::string& dir) {
    auto listing = list(dir);
    if (!listing) return listing.error();
    return listing->checkpoints.empty() ? 0 : listing->checkpoints.back().covered;
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
    for (int attempt = 0; attempt < kScanAttempts; ++attempt) {
        auto listing = list(dir);
        if (!listing) return listing.error();
        ScanResult out;
        bool vanished = false;
        std::vector<JournalRecord> under_checkpoint;  // records the checkpoint covers
        if (!listing->segments.empty()) out.segment_end = listing->segments.back() + 1;
        if (!listing->checkpoints.empty()) {
            const uint64_t covered = listing->checkpoints.back().covered;
            out.covered = covered;
            out.epoch = listing->checkpoints.back().epoch;
            const std::string path = dir + "/" + listing->checkpoints.back().name;
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
                    if (all_zero(r)) continue;  // an empty checkpoint's one zeroed record
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
                // The checkpoint holds the newest of everything below what it covers, as of its
                // writing; a record there that it lacks came later, from a retired index's
                // writer. Past it, only the checkpoint's epoch appends (a rebuilt index starts a
                // whole segment past anything its predecessor reserved), so a record of another
                // epoch there is a late write, never state.
                if (seq < out.covered) {
                    // Told apart from the superseded ones only for inspection (a reporter
                    // asks): it costs a pass over every record, on the compaction path too.
                    if (report) under_checkpoint.push_back(r);
                    continue;
                }
                if (out.epoch != 0 && r.epoch != 0 && r.epoch != out.epoch) {
                    ++out.strays;
                    continue;
                }
                out.records.push_back(r);
                out.next_sequence = std::max(out.next_sequence, seq + 1);
            }
        }
        if (vanished) continue;
        // Below the checkpoint, a record older than the checkpoint's for its address is one it
        // superseded (normal); one that would win is a stray.
        if (under_checkpoint.empty()) return out;
        const auto kept = newest_per_address(out.records);
        for (const JournalRecord& r : under_checkpoint) {
            auto by_address = [](const JournalRecord& x, const JournalRecord& y) {
                if (x.family != y.family) return x.family < y.family;
                return std::memcmp(x.address, y.address, 16) < 0;
            };
            const auto it = std::lower_bound(kept.begin(), kept.end(), r, by_address);
            if (it == kept.end() || by_address(r, *it) || r.slot_gen > it->slot_gen ||
                (r.slot_gen == it->slot_gen && r.sequence > it->sequence)) {
                ++out.strays;
            }
        }
        return out;
    }
    return make_error(Code::kTryAgainLater, "the journal kept changing while it was read", dir);
}

}  // namespace shmipam::shm
