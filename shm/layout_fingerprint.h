// The layout fingerprint of the state files (LMDB's MDB_lock_desc): a hash of the size and of
// every field offset of every struct in format.h, computed at compile time and stored in both
// headers beside the format version. A struct edited without a kFormatVersion bump changes it,
// and a file written by a build with the other layout is refused at open (code 104) instead of
// being misread. A field added to a struct in format.h is added here too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "shm/format.h"

namespace shmipam::format {

namespace layout_detail {
constexpr uint32_t fnv1a(std::initializer_list<uint64_t> values) {
    uint32_t h = 2166136261u;
    for (uint64_t v : values) {
        for (int byte = 0; byte < 8; ++byte) {
            h = (h ^ uint32_t((v >> (8 * byte)) & 0xFF)) * 16777619u;
        }
    }
    return h;
}
}  // namespace layout_detail

inline constexpr uint32_t kLayoutFingerprint = layout_detail::fnv1a({
    sizeof(BlockHeader),
    offsetof(BlockHeader, magic),
    offsetof(BlockHeader, version),
    offsetof(BlockHeader, header_bytes),
    offsetof(BlockHeader, family),
    offsetof(BlockHeader, prefix),
    offsetof(BlockHeader, reserved0),
    offsetof(BlockHeader, layout),
    offsetof(BlockHeader, base),
    offsetof(BlockHeader, slot_count),
    offsetof(BlockHeader, slot_bytes),
    offsetof(BlockHeader, bitmap_offset),
    offsetof(BlockHeader, slots_offset),
    offsetof(BlockHeader, file_bytes),
    offsetof(BlockHeader, created_unix_ns),
    offsetof(BlockHeader, boot_id),
    offsetof(BlockHeader, data_dir),
    offsetof(BlockHeader, network),
    offsetof(BlockHeader, header_crc),
    offsetof(BlockHeader, reserved1),
    offsetof(BlockHeader, pad_immutable),
    offsetof(BlockHeader, retired),
    offsetof(BlockHeader, claims),
    offsetof(BlockHeader, releases),
    offsetof(BlockHeader, cas_retries),
    offsetof(BlockHeader, rollbacks),
    offsetof(BlockHeader, pad_tail),
    sizeof(Slot),
    offsetof(Slot, state),
    offsetof(Slot, owner),
    offsetof(Slot, owner_fp),
    offsetof(Slot, changed_boot_ns),
    offsetof(Slot, allocated_unix_ns),
    offsetof(Slot, reserved),
    sizeof(LeaseSide),
    offsetof(LeaseSide, tag),
    offsetof(LeaseSide, acquired_boot_ms),
    offsetof(LeaseSide, target),
    offsetof(LeaseSide, journal_intent),
    sizeof(AddressRef),
    offsetof(AddressRef, address),
    offsetof(AddressRef, family),
    offsetof(AddressRef, block_prefix),
    offsetof(AddressRef, range_set),
    offsetof(AddressRef, reserved),
    sizeof(Entry),
    offsetof(Entry, state),
    offsetof(Entry, fp1),
    offsetof(Entry, fp2),
    offsetof(Entry, created_unix_ns),
    offsetof(Entry, ref_count),
    offsetof(Entry, flags),
    offsetof(Entry, network_tag),
    offsetof(Entry, ifname),
    offsetof(Entry, container_id),
    offsetof(Entry, refs),
    offsetof(Entry, pod),
    offsetof(Entry, bound_claim),
    sizeof(ClaimFields),
    offsetof(ClaimFields, binding),
    offsetof(ClaimFields, keep_idle),
    offsetof(ClaimFields, records_of_earlier_boot),
    offsetof(ClaimFields, pod),
    sizeof(IndexHeader),
    offsetof(IndexHeader, magic),
    offsetof(IndexHeader, version),
    offsetof(IndexHeader, header_bytes),
    offsetof(IndexHeader, entry_count),
    offsetof(IndexHeader, entry_bytes),
    offsetof(IndexHeader, lease_count),
    offsetof(IndexHeader, lease_offset),
    offsetof(IndexHeader, entries_offset),
    offsetof(IndexHeader, file_bytes),
    offsetof(IndexHeader, block_prefix_v4),
    offsetof(IndexHeader, block_prefix_v6),
    offsetof(IndexHeader, reserved0),
    offsetof(IndexHeader, layout),
    offsetof(IndexHeader, created_unix_ns),
    offsetof(IndexHeader, boot_id),
    offsetof(IndexHeader, data_dir),
    offsetof(IndexHeader, network),
    offsetof(IndexHeader, epoch),
    offsetof(IndexHeader, header_crc),
    offsetof(IndexHeader, reserved1),
    offsetof(IndexHeader, pad_immutable),
    offsetof(IndexHeader, retired),
    offsetof(IndexHeader, max_probe),
    offsetof(IndexHeader, cursor),
    offsetof(IndexHeader, adds),
    offsetof(IndexHeader, dels),
    offsetof(IndexHeader, dead_leases_reaped),
    offsetof(IndexHeader, busy_rejections),
    offsetof(IndexHeader, reboot_reclaims),
    offsetof(IndexHeader, rebuild_skipped_records),
    offsetof(IndexHeader, claim_due),
    offsetof(IndexHeader, journal_tail),
    offsetof(IndexHeader, journal_names_durable),
    offsetof(IndexHeader, reuse_delay_ms),
    offsetof(IndexHeader, ranges_seq),
    offsetof(IndexHeader, ranges_text),
    offsetof(IndexHeader, pad_tail),
    sizeof(JournalRecord),
    offsetof(JournalRecord, crc),
    offsetof(JournalRecord, op),
    offsetof(JournalRecord, family),
    offsetof(JournalRecord, block_prefix),
    offsetof(JournalRecord, range_set),
    offsetof(JournalRecord, sequence),
    offsetof(JournalRecord, address),
    offsetof(JournalRecord, slot_gen),
    offsetof(JournalRecord, flags),
    offsetof(JournalRecord, fp1),
    offsetof(JournalRecord, fp2),
    offsetof(JournalRecord, unix_ns),
    offsetof(JournalRecord, boot_id),
    offsetof(JournalRecord, container_id),
    offsetof(JournalRecord, ifname),
    offsetof(JournalRecord, pod),
    offsetof(JournalRecord, epoch),
    offsetof(JournalRecord, claim_keep_idle),
    offsetof(JournalRecord, reserved),
});

}  // namespace shmipam::format
