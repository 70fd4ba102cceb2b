// ADD: docs/claim-protocol.md, "ADD, step by step"; the numbered comments are its steps.
#include <cstring>

#include "base/clock.h"
#include "base/fault_point.h"
#include "engine/ops/allocator.h"
#include "engine/ops/lease_guard.h"
#include "engine/policy/next_fit.h"
#include "engine/slots/entry_fields.h"
#include "engine/slots/slot_ops.h"
#include "engine/state/journal_records.h"
#include "shm/atomic_word.h"

namespace shmipam::engine {

using format::EntryState;
using shm::EntryWord;

Expected<std::vector<std::optional<IpAddress>>> Allocator::map_requests(
    const std::vector<IpAddress>& requested) {
    std::vector<std::optional<IpAddress>> per_set(cfg_.range_sets.size());
    for (const IpAddress& a : requested) {
        bool placed = false;
        for (size_t s = 0; s < cfg_.range_sets.size() && !placed; ++s) {
            const RangeSet& set = cfg_.range_sets[s];
            if (!range_index_for(set, a)) continue;
            if (excluded_in_set(set, a)) {
                return make_error(Code::kRequestedAddressInvalid,
                                  "requested IP address " + a.to_string() +
                                      " is a network, broadcast or gateway address");
            }
            if (per_set[s]) {
                return make_error(
                    Code::kRequestedAddressInvalid,
                    "more than one requested IP address in range set " + to_string(set));
            }
            per_set[s] = a;
            placed = true;
        }
        if (!placed) {
            return make_error(Code::kRequestedAddressInvalid,
                              "requested IP address " + a.to_string() + " is not in any range");
        }
    }
    return per_set;
}

Expected<AddOutcome> Allocator::add(const AddRequest& req) {
    // 1. Validate; map requested addresses to range sets (before any lease: a bad request
    //    changes nothing).
    auto requests = map_requests(req.requested);
    if (!requests) return requests.error();
    if (cfg_.range_sets.size() > format::kMaxRangeSets) {
        return make_error(Code::kInvalidConfig, "at most " + std::to_string(format::kMaxRangeSets) +
                                                    " range sets are supported");
    }
    // 2. Acquire a lease; answer 11 if the state is retired; reap dead leases.
    LeaseGuard lease(store_);
    if (auto st = lease.acquire(); !st) return st.error();
    if (store_.retired()) return retired_error();
    reap_dead_leases(store_);
    if (req.claim) return add_for_claim(req, *requests, lease.handle());
    if (claims_due()) (void)expire_claims_with(lease.handle());

    const Fingerprint fp = fingerprint(req.key.container_id, req.key.ifname);
    const std::string pod = req.pod.name.empty() ? "" : req.pod.namespace_ + "/" + req.pod.name;
    const AttachmentText text{req.key.container_id, req.key.ifname, pod, 0, 0};
    auto added = add_entry(fp, text, req, *requests, lease.handle(), 0);
    // A full network may hold claims whose policy has freed them: the ADD that meets them frees
    // them (docs/fixed-ips.md), then tries once more.
    if (!added && added.error().code == Code::kNoAddressFree &&
        expire_claims_with(lease.handle()).value_or(0) > 0) {
        added = add_entry(fp, text, req, *requests, lease.handle(), 0);
    }
    if (!added) return added.error();
    return std::move(added->outcome);
}

Expected<Allocator::Added> Allocator::add_entry(
    const Fingerprint& fp, const AttachmentText& text, const AddRequest& req,
    const std::vector<std::optional<IpAddress>>& requests, const shm::LeaseHandle& lease,
    uint64_t claim_binding) {
    // 3. Claim the attachment's entry. Existing: answer its addresses. Busy: 11.
    AttachmentIndex index = make_index(store_);
    const EntryClaim claim = index.claim(fp, lease);
    switch (claim.kind) {
        case ClaimKind::kExisting: {
            if (uses_a_claim(store_.index().entry(claim.entry.index).flags)) {
                // A sandbox that used a fixed address, added again without asking for one (its
                // pod's annotations changed): what it uses.
                auto addrs = sandbox_addresses(claim.entry, text.container_id);
                if (!addrs) return addrs.error();
                return Added{AddOutcome{std::move(*addrs), true}, claim.entry.index,
                             claim.entry.word};
            }
            if (store_.index().entry(claim.entry.index).flags & format::kEntryFlagPartial) {
                return make_error(Code::kAttachmentIncomplete,
                                  "the attachment holds addresses for only some range sets "
                                  "(rebuilt after its ADD failed): DEL it, then ADD again");
            }
            auto addrs = describe(claim.entry.index, claim.entry.word);
            if (!addrs) return addrs.error();
            return Added{AddOutcome{std::move(*addrs), true}, claim.entry.index, claim.entry.word};
        }
        case ClaimKind::kBusy:
            shm::bump_counter(store_.index().header().busy_rejections);
            return make_error(Code::kTryAgainLater, "another ADD for container " +
                                                        text.container_id + " interface " +
                                                        text.ifname + " is in progress");
        case ClaimKind::kFull:
            return make_error(Code::kIndexFull, "the network's attachment index is full",
                              std::to_string(store_.index().entry_count()) + " entries");
        case ClaimKind::kClaimed:
            break;
    }
    // 4. Write the entry's display fields, zero its refs, set ref_count.
    const uint64_t e = claim.entry.index;
    const uint64_t entry_word = claim.entry.word;
    format::Entry& ent = store_.index().entry(e);
    ent.created_unix_ns = base::unix_ns();
    ent.flags = text.flags;
    copy_truncated(ent.ifname, sizeof ent.ifname, text.ifname);
    copy_truncated(ent.container_id, sizeof ent.container_id, text.container_id);
    set_pod(ent, text.pod, text.claim_keep_idle, claim_binding);
    set_network_tag(ent, req.network_tag);
    std::memset(ent.refs, 0, sizeof ent.refs);
    std::atomic_thread_fence(std::memory_order_release);
    ent.ref_count = uint8_t(cfg_.range_sets.size());

    // 5. For each range set in order: a candidate (next-fit or the requested address), named
    //    in refs[set] before its slot is CAS'd to CLAIMING by our lease. Every set stays
    //    CLAIMING until all have one; on failure, roll back and answer the error.
    std::vector<ClaimedSlot> claimed;
    size_t current_set = 0;
    ArenaScanner scanner(store_, lease, slot_healer(store_));
    ClaimContext ctx{scanner, store_.index().header().cursor, cfg_.reuse_delay_ms * 1'000'000,
                     base::boot_ns(), [&](const IpAddress& a) {
                         format::AddressRef& ref = ent.refs[current_set];
                         auto b = a.to_bytes();
                         std::copy(b.begin(), b.end(), ref.address);
                         ref.family = uint8_t(a.family);
                         ref.block_prefix = store_.block_prefix(a.family);
                         ref.range_set = uint8_t(current_set);
                         std::atomic_thread_fence(std::memory_order_seq_cst);
                         SHMIPAM_FAULT("add.before_slot_claim");
                     }};
    // Every range set keeps its slot CLAIMING until all have one; then they publish together.
    for (current_set = 0; current_set < cfg_.range_sets.size(); ++current_set) {
        const RangeSet& set = cfg_.range_sets[current_set];
        auto got = requests[current_set] ? claim_requested(ctx, set, *requests[current_set])
                                         : claim_next(ctx, set, current_set);
        if (!got) {
            roll_back_claim(store_, e, entry_word, /*alloc_may_be_journaled=*/false);
            return got.error();
        }
        claimed.push_back(*got);
        SHMIPAM_FAULT("add.after_slot_claim");
    }
    // 6. Journal an ALLOC record per address and make them durable, before anyone can see
    //    the allocation (so before the result is printed).
    const uint64_t now = base::unix_ns();
    const uint16_t tenancy = EntryWord::decode(entry_word).gen;
    {
        AttachmentText stamped = text;
        stamped.created_unix_ns = now;
        std::vector<format::JournalRecord> records;
        for (size_t s = 0; s < claimed.size(); ++s) {
            const IpAddress& a = claimed[s].address;
            records.push_back(make_record(format::JournalOp::kAlloc, a,
                                          store_.block_prefix(a.family), s,
                                          shm::SlotWord::decode(claimed[s].word).gen + 1, fp,
                                          stamped, store_.boot_id(), now));
        }
        if (auto st = store_.append_journal(records); !st) {
            roll_back_claim(store_, e, entry_word);
            return st.error();
        }
        // Retired or replaced since we started: a rebuild may already have read the journal
        // without these records, so this claim must not commit here (the runtime retries on
        // the new state). After the append, so that a rebuild that began before this check
        // reads the records.
        SHMIPAM_FAULT("add.before_superseded_check");
        if (store_.superseded()) {
            roll_back_claim(store_, e, entry_word);
            return retired_error();
        }
    }
    // 7. Publish each slot: CLAIMING -> ALLOCATED to (entry, tenancy).
    bool published = true;
    for (size_t s = 0; s < claimed.size() && published; ++s) {
        published = slot_ops::publish(*claimed[s].block, claimed[s].slot, claimed[s].word, e, s,
                                      tenancy, fp.fp1, now);
        SHMIPAM_FAULT("add.after_publish");
    }
    // 8. Commit: the entry CLAIMING -> COMMITTED, the commit point. It fails only if a healer
    //    judged this invocation dead and rolled the claim back: then nothing is held.
    SHMIPAM_FAULT("add.before_commit");
    if (!published || !index.commit(claim.entry, fp)) {
        roll_back_claim(store_, e, entry_word);
        return make_error(Code::kTryAgainLater, "the claim was rolled back by another invocation");
    }
    SHMIPAM_FAULT("add.after_commit");
    // 9. Read the committed addresses (the lease guard settles our work and frees the lease).
    shm::bump_counter(store_.index().header().adds);
    const uint64_t committed = EntryWord::next(entry_word, EntryState::kCommitted, fp.fp16());
    auto addrs = describe(e, committed);
    if (!addrs) return addrs.error();
    return Added{AddOutcome{std::move(*addrs), false}, e, committed};
}

}  // namespace shmipam::engine
