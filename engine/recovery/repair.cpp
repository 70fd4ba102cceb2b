// repair's write that is not healing: allocations the arena holds but the journal lacks are
// journaled again, so they survive a rebuild (the arena is the truth while it exists).
#include "engine/recovery/repair.h"

#include "base/clock.h"
#include "engine/slots/attachment_index.h"
#include "engine/slots/block_map.h"
#include "engine/slots/entry_fields.h"
#include "engine/slots/slot_ops.h"
#include "engine/state/journal_records.h"
#include "shm/atomic_word.h"
#include "shm/codec.h"
#include "shm/journal.h"

namespace shmipam::engine {

using format::SlotState;
using shm::SlotWord;

Expected<size_t> rejournal_allocations(NetworkStore& store) {
    auto scan = shm::Journal::scan(store.journal().dir());
    if (!scan) return scan.error();
    const auto newest = newest_records(scan->records);
    auto blocks = store.all_blocks();
    if (!blocks) return blocks.error();
    std::vector<format::JournalRecord> missing;
    for (shm::BlockFile* b : *blocks) {
        const IpAddress base = block_base_of(*b);
        for (uint64_t i = 0; i < b->slot_count(); ++i) {
            const SlotWord sw = SlotWord::decode(slot_ops::load_state(*b, i));
            if (sw.state != SlotState::kAllocated) continue;
            const IpAddress a{base.value + i, base.family};
            const format::Slot& s = b->slot(i);
            if (journaled_as_allocation(newest, a, shm::load_word(s.owner_fp))) continue;
            if (sw.owner_entry() >= store.index().entry_count()) continue;
            const format::Entry& e = store.index().entry(sw.owner_entry());
            const uint64_t ew = shm::load_word(e.state);
            auto fp = AttachmentIndex::read_fp(e, ew);
            if (!fp) continue;
            const AttachmentText text{fixed(e.container_id, sizeof e.container_id),
                                      fixed(e.ifname, sizeof e.ifname),
                                      pod_of(e),
                                      e.flags,
                                      shm::load_word(s.allocated_unix_ns),
                                      held_for_a_name(e.flags) ? e.claim.keep_idle : 0};
            const size_t range_set = shm::SlotOwner::range_set(shm::load_word(s.owner));
            missing.push_back(make_record(format::JournalOp::kAlloc, a, b->header().prefix,
                                          range_set, sw.gen, *fp, text, store.boot_id(),
                                          base::unix_ns()));
        }
    }
    if (auto st = store.append_journal(missing); !st) {
        return st.error();
    }
    return missing.size();
}

}  // namespace shmipam::engine
