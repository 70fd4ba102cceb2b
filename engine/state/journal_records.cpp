#include "engine/state/journal_records.h"

#include <cstring>

#include "engine/slots/entry_fields.h"

namespace shmipam::engine {

namespace {}  // namespace

format::JournalRecord make_record(format::JournalOp op, const IpAddress& address,
                                  uint8_t block_prefix, size_t range_set, uint32_t slot_gen,
                                  const Fingerprint& fp, const AttachmentText& text,
                                  const std::array<uint8_t, 16>& boot_id, uint64_t unix_ns) {
    format::JournalRecord r{};
    r.op = uint8_t(op);
    r.family = uint8_t(address.family);
    r.block_prefix = block_prefix;
    r.range_set = uint8_t(range_set);
    auto bytes = address.to_bytes();
    std::memcpy(r.address, bytes.data(), 16);
    r.slot_gen = slot_gen;
    r.flags = text.flags;
    r.fp1 = fp.fp1;
    r.fp2 = fp.fp2;
    r.unix_ns = unix_ns;
    std::memcpy(r.boot_id, boot_id.data(), 16);
    copy_truncated(r.container_id, sizeof r.container_id, text.container_id);
    copy_truncated(r.ifname, sizeof r.ifname, text.ifname);
    copy_truncated(r.pod, sizeof r.pod, text.pod);
    r.claim_keep_idle = text.claim_keep_idle;
    return r;
}

IpAddress record_address(const format::JournalRecord& r) {
    std::array<uint8_t, 16> b{};
    std::memcpy(b.data(), r.address, 16);
    return IpAddress::from_bytes(Family(r.family), b);
}

NewestRecords newest_records(const std::vector<format::JournalRecord>& records) {
    NewestRecords out;
    for (const auto& r : records) {
        const IpAddress a = record_address(r);
        const format::JournalRecord*& cur = out[{int(a.family), a.value}];
        if (cur == nullptr || r.slot_gen > cur->slot_gen ||
            (r.slot_gen == cur->slot_gen && r.sequence > cur->sequence)) {
            cur = &r;
        }
    }
    return out;
}

bool journaled_as_allocation(const NewestRecords& newest, const IpAddress& a, uint64_t owner_fp1) {
    auto it = newest.find({int(a.family), a.value});
    return it != newest.end() && it->second->op == uint8_t(format::JournalOp::kAlloc) &&
           it->second->fp1 == owner_fp1;
}

}  // namespace shmipam::engine
