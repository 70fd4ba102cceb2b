// Describing a journal segment or a checkpoint (describe.h). Neither has a header: a segment
// is 4096 record slots at fixed positions, a checkpoint packed records below its `covered`.
// Each slot that is not all zero is a record, or damage said at its offset; the dump goes on.
#include "shm/journal.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "tools/state_file/describe.h"

namespace shmipam::tools::state_file {

namespace {

using format::JournalRecord;

bool all_zero(const JournalRecord& r) {
    auto* p = reinterpret_cast<const uint8_t*>(&r);
    return std::all_of(p, p + sizeof r, [](uint8_t b) { return b == 0; });
}

const char* op_name(uint8_t op) {
    switch (format::JournalOp(op)) {
        case format::JournalOp::kAlloc:
            return "alloc";
        case format::JournalOp::kRelease:
            return "release";
        case format::JournalOp::kRollback:
            return "rollback";
    }
    return nullptr;
}

// Why the record is not valid (Journal::record_damage, plus a checkpoint's coverage), or ""
// when it is.
std::string damage_of(const JournalRecord& r, uint64_t expected_sequence, bool any_sequence,
                      uint64_t covered) {
    // A checkpoint's records sit anywhere: their sequence is only checked against what it covers.
    std::string why = shm::Journal::record_damage(r, any_sequence ? r.sequence : expected_sequence);
    if (!why.empty()) return why;
    if (any_sequence && r.sequence >= covered) {
        return "sequence " + std::to_string(r.sequence) + " not below the covered " +
               std::to_string(covered);
    }
    return "";
}

FileItem record_item(const JournalRecord& r, uint64_t offset) {
    FileItem it{"record", r.sequence, offset, {}, {}};
    it.fields = {{"op", std::string(op_name(r.op))},
                 {"address", address_of(r.family, r.address)},
                 {"range_set", uint64_t(r.range_set)},
                 {"slot_gen", uint64_t(r.slot_gen)},
                 {"container", text_of(r.container_id, sizeof r.container_id)},
                 {"ifname", text_of(r.ifname, sizeof r.ifname)}};
    if (r.pod[0] != '\0') it.fields.push_back({"pod", text_of(r.pod, sizeof r.pod)});
    if (r.flags & format::kEntryFlagImported) it.fields.push_back({"imported", uint64_t(1)});
    if (r.flags & format::kEntryFlagClaim) it.fields.push_back({"claim", uint64_t(1)});
    it.fields.push_back({"time", utc(r.unix_ns)});
    it.fields.push_back({"boot_id", uuid(r.boot_id)});
    if (r.epoch != 0) {
        char epoch[24];
        std::snprintf(epoch, sizeof epoch, "%016llx", (unsigned long long)r.epoch);
        it.fields.push_back({"epoch", std::string(epoch)});
    }
    return it;
}

// Lists every record slot; `expected(k)` is the sequence slot k must hold, or none for a
// checkpoint (whose records keep their own sequence, each below `covered`).
FileDescription describe_records(std::span<const std::byte> bytes, bool checkpoint,
                                 uint64_t first_sequence, uint64_t covered) {
    FileDescription d;
    uint64_t valid = 0, damaged = 0, unused = 0;
    uint64_t ops[4] = {};
    const size_t n = bytes.size() / sizeof(JournalRecord);
    for (size_t k = 0; k < n; ++k) {
        JournalRecord r;
        std::memcpy(&r, bytes.data() + k * sizeof r, sizeof r);
        if (all_zero(r)) {
            ++unused;  // never written (or never will be): skipped, counted
            continue;
        }
        const uint64_t offset = k * sizeof r;
        const std::string why = damage_of(r, first_sequence + k, checkpoint, covered);
        if (!why.empty()) {
            ++damaged;
            d.items.push_back(
                {"record", checkpoint ? r.sequence : first_sequence + k, offset, {}, why});
            continue;
        }
        ++valid;
        ++ops[r.op];
        d.items.push_back(record_item(r, offset));
    }
    d.summary = {{"records", valid},   {"alloc", ops[1]},    {"release", ops[2]},
                 {"rollback", ops[3]}, {"damaged", damaged}, {"unused_slots_skipped", unused}};
    return d;
}

bool none_valid(const FileDescription& d) {
    return !d.items.empty() && std::all_of(d.items.begin(), d.items.end(),
                                           [](const FileItem& i) { return !i.damage.empty(); });
}

}  // namespace

Expected<FileDescription> describe_segment(std::span<const std::byte> bytes, uint64_t segment) {
    if (bytes.size() != format::kJournalSegmentBytes) {
        // Segments are created whole (fallocated) and never shrink: any other size is a cut
        // copy or not a segment at all.
        return make_error(Code::kArenaDamaged,
                          "truncated or not a journal segment: " + std::to_string(bytes.size()) +
                              " bytes, a segment is " +
                              std::to_string(format::kJournalSegmentBytes));
    }
    const uint64_t first = segment * format::kJournalRecordsPerSegment;
    FileDescription d = describe_records(bytes, false, first, 0);
    if (none_valid(d)) {
        return make_error(Code::kArenaForeign, "not a journal segment: no record in it is valid (" +
                                                   std::to_string(d.items.size()) +
                                                   " non-zero slots, all damaged)");
    }
    d.kind = "journal segment";
    d.header = {{"segment", segment},
                {"first_sequence", first},
                {"record_slots", format::kJournalRecordsPerSegment},
                {"record_bytes", uint64_t(sizeof(JournalRecord))},
                {"file_bytes", uint64_t(bytes.size())}};
    return d;
}

Expected<FileDescription> describe_checkpoint(std::span<const std::byte> bytes, uint64_t covered) {
    if (bytes.size() % sizeof(JournalRecord) != 0) {
        return make_error(Code::kArenaDamaged, "truncated: " + std::to_string(bytes.size()) +
                                                   " bytes is not a whole number of " +
                                                   std::to_string(sizeof(JournalRecord)) +
                                                   "-byte records");
    }
    FileDescription d = describe_records(bytes, true, 0, covered);
    if (none_valid(d)) {
        return make_error(Code::kArenaForeign, "not a checkpoint: no record in it is valid (" +
                                                   std::to_string(d.items.size()) +
                                                   " non-zero slots, all damaged)");
    }
    d.kind = "checkpoint";
    d.header = {{"covered", covered},
                {"record_slots", uint64_t(bytes.size() / sizeof(JournalRecord))},
                {"record_bytes", uint64_t(sizeof(JournalRecord))},
                {"file_bytes", uint64_t(bytes.size())}};
    return d;
}

}  // namespace shmipam::tools::state_file
