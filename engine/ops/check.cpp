// Reads: CHECK (the addresses an attachment holds) and STATUS (whether every range set could
// serve an ADD), and how both describe an attachment.
#include "engine/ops/allocator.h"
#include "engine/ops/lease_guard.h"
#include "engine/policy/next_fit.h"
#include "engine/slots/entry_fields.h"
#include "engine/slots/slot_ops.h"
#include "shm/atomic_word.h"

namespace shmipam::engine {

using format::EntryState;
using shm::EntryWord;

bool Allocator::slot_owned_by(const IpAddress& a, uint64_t entry_index, uint16_t tenancy) {
    auto block = store_.block_for(a, false);
    if (!block || *block == nullptr) return false;
    const uint64_t w = slot_ops::load_state(**block, store_.slot_of(a));
    return shm::SlotWord::decode(w).owned_by(entry_index, tenancy);
}

Expected<std::vector<AllocatedAddress>> Allocator::describe(uint64_t entry_index,
                                                            uint64_t entry_word) {
    const format::Entry& e = store_.index().entry(entry_index);
    const size_t n = std::min<size_t>(e.ref_count, format::kMaxRangeSets);
    format::AddressRef refs[format::kMaxRangeSets] = {};
    std::copy(e.refs, e.refs + n, refs);
    std::atomic_thread_fence(std::memory_order_acquire);
    // Copied while the entry was still that attachment's (seqlock-style re-check): a DEL and a
    // reuse of the entry in between would otherwise hand back another attachment's addresses.
    if (shm::load_word(store_.index().entry(entry_index).state) != entry_word) {
        return make_error(Code::kTryAgainLater, "the attachment changed while being read");
    }
    std::vector<AllocatedAddress> out;
    for (size_t r = 0; r < n; ++r) {
        const format::AddressRef& ref = refs[r];
        if (ref.family != 4 && ref.family != 6) continue;
        AllocatedAddress aa{ref_address(ref), ref.range_set, nullptr};
        for (size_t s = 0; s < cfg_.range_sets.size() && aa.range == nullptr; ++s) {
            if (auto i = range_index_for(cfg_.range_sets[s], aa.address)) {
                aa.range = &cfg_.range_sets[s][*i];
                aa.range_set = s;
            }
        }
        if (aa.range == nullptr) {
            return make_error(Code::kInvalidConfig,
                              "the attachment holds " + aa.address.to_string() +
                                  ", which is outside every configured range");
        }
        // Answer only addresses whose slot is this tenancy's: an entry that names a slot it does
        // not own (a release half done, a slot freed under it) must never be described as
        // holding it, since that slot may already be another attachment's.
        if (!slot_owned_by(aa.address, entry_index, EntryWord::decode(entry_word).gen)) {
            return make_error(Code::kTryAgainLater,
                              "the attachment's address " + aa.address.to_string() +
                                  " is not held by it: a release or a repair is in progress");
        }
        out.push_back(aa);
    }
    return out;
}

Expected<std::vector<AllocatedAddress>> Allocator::addresses_of(const AttachmentKey& key) {
    const Fingerprint fp = fingerprint(key.container_id, key.ifname);
    AttachmentIndex index = make_index(store_);
    for (const EntryRef& e : index.find(fp)) {
        if (EntryWord::decode(e.word).state != EntryState::kCommitted) continue;
        if (!uses_a_claim(store_.index().entry(e.index).flags)) return describe(e.index, e.word);
        // A sandbox using a claim holds the claim's addresses while the claim is bound to it.
        auto held = sandbox_addresses(e, key.container_id);
        if (!held && held.error().code == Code::kClaimMoved) {
            return make_error(Code::kCheckNoAllocation, held.error().msg);
        }
        return held;
    }
    return make_error(Code::kCheckNoAllocation, "no address is allocated to container " +
                                                    key.container_id + " interface " + key.ifname);
}

Status Allocator::status() {
    reap_dead_leases(store_);  // STATUS sweeps what dead invocations left
    if (claims_due()) {
        if (auto freed = expire_claims(); !freed) return freed.error();
    }
    for (size_t s = 0; s < cfg_.range_sets.size(); ++s) {
        auto ok = can_serve(store_, cfg_.range_sets[s]);
        if (!ok) return ok.error();
        if (!*ok) {
            return make_error(Code::kUnavailable, "no IP addresses available in range set " +
                                                      to_string(cfg_.range_sets[s]));
        }
    }
    return Ok{};
}

}  // namespace shmipam::engine
