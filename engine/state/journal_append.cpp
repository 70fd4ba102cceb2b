// Journal appends of an invocation, with the journal intent of the lease it holds (or of one
// taken just for the append), so a concurrent compaction never drops what it writes.
#include "engine/state/network_store.h"

namespace shmipam::engine {

Status NetworkStore::append_journal(std::span<format::JournalRecord> records) {
    auto& leases = index_.leases();
    auto append = [&](const shm::LeaseHandle& h) {
        auto st = journal_->append(
            index_.header().journal_tail, records,
            shm::JournalIntent{&leases.intent_word(h.index), h.gen16(), &leases.word_ref(h.index)});
        if (journal_->reached_compaction_check()) compaction_due_ = true;
        return st;
    };
    if (active_lease_ != nullptr) return append(*active_lease_);
    auto lease = leases.acquire(self_);
    if (!lease) return lease.error();
    auto st = append(*lease);
    leases.release(*lease);
    return st;
}

}  // namespace shmipam::engine
