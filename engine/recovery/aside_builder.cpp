#include "engine/recovery/aside_builder.h"

#include <cstring>

#include "engine/slots/attachment_index.h"
#include "engine/slots/entry_fields.h"
#include "engine/slots/slot_ops.h"
#include "shm/atomic_word.h"
#include "shm/codec.h"

namespace shmipam::engine {

using format::EntryState;
using format::SlotState;
using shm::EntryWord;
using shm::SlotWord;

namespace {

// The first tenancy of an entry: claimed (generation 1) and committed.
uint64_t first_tenancy_word(const Fingerprint& fp) {
    const uint64_t claiming = EntryWord::next(0, EntryState::kClaiming, fp.fp16());
    return EntryWord::next(claiming, EntryState::kCommitted, fp.fp16());
}

}  // namespace

Expected<uint64_t> AsideBuilder::add_entry(const Fingerprint& fp, const AttachmentText& text,
                                           uint64_t claim_binding, bool claim_of_earlier_boot) {
    const uint64_t mask = aside_.entry_count() - 1;
    uint64_t e = fp.fp1 & mask;
    uint64_t d = 0;
    while (EntryWord::decode(aside_.entry(e).state).state != EntryState::kEmpty) {
        if (++d > mask) return make_error(Code::kIndexFull, "too many attachments to rebuild");
        e = (e + 1) & mask;
    }
    shm::fetch_max_word(aside_.header().max_probe, d);
    format::Entry& ent = aside_.entry(e);
    const uint64_t committed = first_tenancy_word(fp);
    ent.fp2 = fp.fp2;
    ent.fp1 = AttachmentIndex::stamped_fp1(committed, fp);
    ent.created_unix_ns = text.created_unix_ns;
    ent.flags = text.flags;
    copy_truncated(ent.container_id, sizeof ent.container_id, text.container_id);
    copy_truncated(ent.ifname, sizeof ent.ifname, text.ifname);
    set_pod(ent, text.pod, text.claim_keep_idle, claim_binding, claim_of_earlier_boot ? 1 : 0);
    ent.ref_count = uint8_t(std::min(range_sets_, format::kMaxRangeSets));
    ent.state = committed;
    return e;
}

AsideBuilder::SlotFill& AsideBuilder::fill_for(const IpAddress& address, uint8_t block_prefix) {
    const u128 host_mask = (u128{1} << (address.bits() - block_prefix)) - 1;
    const IpAddress base{address.value & ~host_mask, address.family};
    auto& blk = blocks_[{int(base.family), base.value}];
    blk.first = base;
    SlotFill& f = blk.second[uint64_t(address.value & host_mask)];
    f.slot = uint64_t(address.value & host_mask);
    return f;
}

void AsideBuilder::add_address(uint64_t entry, size_t range_set, const IpAddress& address,
                               uint8_t block_prefix, uint32_t min_gen, uint64_t owner_fp,
                               uint64_t allocated_unix_ns) {
    format::Entry& ent = aside_.entry(entry);
    if (range_set < format::kMaxRangeSets && ent.refs[range_set].family == 0) {
        format::AddressRef& ref = ent.refs[range_set];
        auto bytes = address.to_bytes();
        std::copy(bytes.begin(), bytes.end(), ref.address);
        ref.family = uint8_t(address.family);
        ref.block_prefix = block_prefix;
        ref.range_set = uint8_t(range_set);
    }
    const uint16_t tenancy = EntryWord::decode(ent.state).gen;
    SlotFill& f = fill_for(address, block_prefix);
    // Generations continue past every one the journal has seen for this address, so records
    // written from now on always win over older ones on replay.
    const uint64_t base_word = SlotWord{SlotState::kFree, 0, 0, min_gen}.encode();
    f.word = SlotWord::allocated(base_word, entry, tenancy);
    f.owner = shm::SlotOwner::pack(entry, range_set, tenancy);
    f.owner_fp = owner_fp;
    f.allocated_unix_ns = allocated_unix_ns;
}

void AsideBuilder::set_slot(const IpAddress& address, uint8_t block_prefix, uint32_t min_gen,
                            bool cooling, uint64_t released_boot_ns) {
    SlotFill& f = fill_for(address, block_prefix);
    f.word = SlotWord{cooling ? SlotState::kCooling : SlotState::kFree, 0, 0, min_gen + 1}.encode();
    f.changed_boot_ns = cooling ? released_boot_ns : 0;
}

Status AsideBuilder::build_blocks(const BlockOpener& open_block) {
    for (const auto& [key, blk] : blocks_) {
        const auto& fills = blk.second;
        auto made = open_block(blk.first, [&fills](shm::BlockFile& b) -> Status {
            for (const auto& [slot, f] : fills) {
                format::Slot& s = b.slot(slot);
                s.owner = f.owner;
                s.owner_fp = f.owner_fp;
                s.allocated_unix_ns = f.allocated_unix_ns;
                s.changed_boot_ns = f.changed_boot_ns;
                s.state = f.word;
                slot_ops::sync_hint(b, slot);
            }
            return Ok{};
        });
        if (!made) return made.error();
    }
    return Ok{};
}

}  // namespace shmipam::engine
