#include "engine/state/journal_compaction.h"

#include <algorithm>
#include <atomic>

#include "base/fault_point.h"
#include "shm/atomic_word.h"

namespace shmipam::engine {

using format::kJournalRecordsPerSegment;

uint64_t compaction_boundary(NetworkStore& store) {
    // Tail first, then the intents (both seq_cst): an appender whose intent we miss reserves
    // after this load of the tail (journal.cpp, Journal::append).
    uint64_t boundary = std::atomic_ref<uint64_t>(store.index().header().journal_tail)
                            .load(std::memory_order_seq_cst);
    auto& leases = store.index().leases();
    for (uint32_t i = 0; i < leases.size(); ++i) {
        const uint64_t word = leases.word(i);
        if (shm::LeaseTable::pid_of(word) == 0) continue;
        const auto intent = leases.intent_of(i, word);
        if (!intent || *intent >= boundary) continue;
        // A dead appender never writes again: what it reserved stays a hole.
        if (leases.judge(i, word, store.self()) == shm::Holder::kDead) continue;
        boundary = *intent;
    }
    return boundary / kJournalRecordsPerSegment * kJournalRecordsPerSegment;
}

Expected<std::optional<Compaction>> compact_journal(NetworkStore& store, uint64_t max_segments) {
    const std::string& dir = store.journal().dir();
    auto covered = shm::Journal::checkpoint_covered(dir);
    if (!covered) return covered.error();
    const uint64_t tail = shm::load_word(store.index().header().journal_tail);
    if (max_segments == 0 || tail <= *covered) return std::optional<Compaction>();
    // Segments from the checkpoint's to the one being written, both included.
    const uint64_t live =
        (tail - 1) / kJournalRecordsPerSegment - *covered / kJournalRecordsPerSegment + 1;
    if (live <= max_segments) return std::optional<Compaction>();
    const uint64_t boundary = compaction_boundary(store);
    if (boundary <= *covered) return std::optional<Compaction>();
    SHMIPAM_FAULT("compact.after_boundary");
    auto scan = shm::Journal::scan(dir, boundary);
    if (!scan) return scan.error();
    // Another compactor got further meanwhile: its checkpoint already covers ours.
    if (scan->next_sequence > boundary) return std::optional<Compaction>();
    std::vector<format::JournalRecord> newest = shm::Journal::newest_per_address(scan->records);
    const bool sync = store.journal().mode() != shm::SyncMode::kNone;
    if (auto st = shm::Journal::compact(dir, boundary, newest, sync, store.journal().epoch());
        !st) {
        return st.error();
    }
    return std::optional<Compaction>(Compaction{boundary, newest.size()});
}

void compact_journal_if_due(NetworkStore& store) {
    if (!store.compaction_due()) return;
    store.clear_compaction_due();
    (void)compact_journal(store, store.journal_max_segments());
}

}  // namespace shmipam::engine
