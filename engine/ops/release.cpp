// Releases: DEL, GC, and the operator's releases (shmipamctl release, gc): docs/claim-protocol.md,
// "DEL, step by step". Each attachment is released with a CAS from the word it was seen with,
// so one re-claimed meanwhile is never touched.
#include <algorithm>
#include <cstring>
#include <set>

#include "base/clock.h"
#include "base/fault_point.h"
#include "engine/ops/allocator.h"
#include "engine/ops/lease_guard.h"
#include "engine/slots/entry_fields.h"
#include "engine/slots/slot_ops.h"
#include "shm/atomic_word.h"

namespace shmipam::engine {

using format::EntryState;
using shm::EntryWord;

namespace {

// How long a DEL waits for a concurrent ADD or DEL of the same attachment to finish.
constexpr uint64_t kBusyWaitNs = 2'000'000'000;  // then 11: the runtime retries
// Passes a DEL makes without pausing while what it finds only changes (an entry healed, or moved
// under its release): each follows progress, and the next pass usually finds the attachment
// settled. Past them, or while a live invocation holds the attachment, it pauses.
constexpr int kEagerPasses = 9;
// The pause: a live ADD or DEL of one attachment finishes within milliseconds, so looking every
// millisecond adds little to the DEL's wait and costs one lookup per look.
constexpr useconds_t kBusyPauseUs = 1000;

}  // namespace

Allocator::Released Allocator::release_entry(uint64_t entry_index, uint64_t word,
                                             const shm::LeaseHandle& lease) {
    const format::Entry& ent = store_.index().entry(entry_index);
    const uint8_t flags = ent.flags;  // written before the commit: fixed for the tenancy
    // A claim is marked expiring before its release, so that no ADD binds it meanwhile.
    if (held_for_a_name(flags) && !mark_expiring(entry_index, word)) return Released::kChanged;
    if (!uses_a_claim(flags)) return release_committed(entry_index, word, lease);
    // A sandbox using a claim lets go of it before its release (a crash between leaves the
    // sandbox entry for its retried DEL, which then frees nothing), and tries again after it:
    // a bind that raced the first try is seen by one of the two re-checks (bind's or this one).
    const auto claim = claim_of(entry_index, word);
    std::optional<EntryRef> claim_to_free;
    if (claim) claim_to_free = unbind(*claim, entry_index, word);
    const Released done = release_committed(entry_index, word, lease);
    if (done != Released::kDone) return done;
    if (claim && !claim_to_free) claim_to_free = unbind(*claim, entry_index, word);
    if (claim_to_free) (void)release_entry(claim_to_free->index, claim_to_free->word, lease);
    return done;
}

Allocator::Released Allocator::release_committed(uint64_t entry_index, uint64_t word,
                                                 const shm::LeaseHandle& lease) {
    AttachmentIndex index = make_index(store_);
    store_.index().leases().set_target(lease, entry_index, EntryWord::decode(word).gen);
    SHMIPAM_FAULT("del.after_target");
    uint64_t releasing = 0;
    if (!index.begin_release({entry_index, word}, lease, &releasing)) return Released::kChanged;
    SHMIPAM_FAULT("del.after_entry_release");
    if (!complete_release(store_, entry_index, releasing, ReleaseBy::kOwner)) return Released::kIo;
    shm::bump_counter(store_.index().header().dels);
    return Released::kDone;
}

Status Allocator::del(const AttachmentKey& key) {
    LeaseGuard lease(store_);
    if (auto st = lease.acquire(); !st) return st.error();
    if (store_.retired()) return retired_error();
    reap_dead_leases(store_);
    if (claims_due()) (void)expire_claims_with(lease.handle());
    const Fingerprint fp = fingerprint(key.container_id, key.ifname);
    AttachmentIndex index = make_index(store_);
    const uint64_t deadline = base::boot_ns() + kBusyWaitNs;
    for (int pass = 0; base::boot_ns() < deadline; ++pass) {
        bool busy = false;
        bool changed = false;
        // An entry of a live ADD not yet stamped may be this attachment's: busy, never absent
        // (answering success here would let that ADD commit after the runtime's DEL).
        bool unsettled = false;
        for (const EntryRef& e : index.find(fp, &unsettled)) {
            const EntryWord w = EntryWord::decode(e.word);
            if (w.state == EntryState::kCommitted) {
                const Released r = release_entry(e.index, e.word, lease.handle());
                if (r == Released::kIo) {
                    return make_error(Code::kIo,
                                      "cannot complete the release: the journal cannot be "
                                      "written or a block arena cannot be opened",
                                      store_.dir());
                }
                if (r == Released::kChanged) changed = true;
            } else if (heal_entry_if_orphaned(store_, e.index, e.word)) {
                changed = true;
            } else {
                busy = true;  // a live ADD or DEL of the same attachment: let it finish
            }
        }
        // A release journaled on a retired or replaced state may have missed the rebuild: say
        // so, and the runtime's retry finds the attachment (or nothing) in the new state.
        if (store_.superseded()) return retired_error();
        if (unsettled) busy = true;
        if (!busy && !changed) return Ok{};
        if (busy || pass >= kEagerPasses) usleep(kBusyPauseUs);  // look again, politely
    }
    return make_error(Code::kTryAgainLater, "another operation on container " + key.container_id +
                                                " interface " + key.ifname + " is in progress");
}

Expected<GcOutcome> Allocator::gc(const std::vector<AttachmentKey>& valid,
                                  std::optional<uint64_t> only_tag) {
    std::set<std::pair<uint64_t, uint64_t>> keep;
    for (const auto& k : valid) {
        const Fingerprint f = fingerprint(k.container_id, k.ifname);
        keep.insert({f.fp1, f.fp2});
    }
    auto released = release_where(
        [&](const format::Entry& e, const Fingerprint& f) {
            if (only_tag && network_tag_of(e) != *only_tag) return false;
            if (held_for_a_name(e.flags)) return false;  // not a sandbox's
            return keep.count({f.fp1, f.fp2}) == 0;
        },
        false);
    if (!released) return released.error();
    auto expired = expire_claims();
    if (!expired) return expired.error();
    return GcOutcome{released->size(), *expired};
}

namespace {

ReleasedAttachment view_of(const format::Entry& e) {
    ReleasedAttachment r;
    r.container_id = std::string(e.container_id, strnlen(e.container_id, sizeof e.container_id));
    r.ifname = std::string(e.ifname, strnlen(e.ifname, sizeof e.ifname));
    r.pod = pod_of(e);
    for (size_t k = 0; k < std::min<size_t>(e.ref_count, format::kMaxRangeSets); ++k) {
        if (e.refs[k].family == 4 || e.refs[k].family == 6)
            r.addresses.push_back(ref_address(e.refs[k]));
    }
    return r;
}

}  // namespace

Expected<std::vector<ReleasedAttachment>> Allocator::release_where(const EntryFilter& filter,
                                                                   bool dry_run) {
    if (store_.retired()) return retired_error();
    LeaseGuard lease(store_);
    if (!dry_run) {
        if (auto st = lease.acquire(); !st) return st.error();
        reap_dead_leases(store_);
    }
    std::vector<ReleasedAttachment> out;
    shm::IndexFile& idx = store_.index();
    for (uint64_t i = 0; i < idx.entry_count(); ++i) {
        const uint64_t w = shm::load_word(idx.entry(i).state);
        if (EntryWord::decode(w).state != EntryState::kCommitted) continue;
        auto f = AttachmentIndex::read_fp(idx.entry(i), w);
        if (!f || !filter(idx.entry(i), *f)) continue;
        ReleasedAttachment view = view_of(idx.entry(i));
        if (dry_run) {
            out.push_back(std::move(view));
            continue;
        }
        const Released r = release_entry(i, w, lease.handle());
        if (r == Released::kIo) {
            return make_error(Code::kIo,
                              "cannot complete a release: the journal cannot be written or a "
                              "block arena cannot be opened",
                              store_.dir());
        }
        if (r == Released::kDone) out.push_back(std::move(view));
    }
    return out;
}

Expected<std::vector<ReleasedAttachment>> Allocator::release_address(const IpAddress& address,
                                                                     bool dry_run) {
    auto block = store_.block_for(address, false);
    if (!block) return block.error();
    std::vector<ReleasedAttachment> none;
    if (*block == nullptr) return none;
    const shm::SlotWord sw =
        shm::SlotWord::decode(slot_ops::load_state(**block, store_.slot_of(address)));
    if (sw.state != format::SlotState::kAllocated ||
        sw.owner_entry() >= store_.index().entry_count()) {
        return none;
    }
    // Release the owner only in the tenancy that holds the address now: the generation check
    // that keeps a concurrent DEL + ADD of the address safe. The slot's owner tenancy is 11
    // bits, so an allocation left by an ended tenancy can match a live one 2048 tenancies later:
    // the live tenant must also name the address in its refs, or a release by address would free
    // an unrelated pod's addresses while it still uses them.
    const uint64_t owner = sw.owner_entry();
    const uint64_t word = shm::load_word(store_.index().entry(owner).state);
    const uint16_t tenancy = EntryWord::decode(word).gen;
    const auto names_address = [&](const format::Entry& e) {
        return std::ranges::count(view_of(e).addresses, address) > 0;
    };
    return release_where(
        [&, word](const format::Entry& e, const Fingerprint&) {
            return &e == &store_.index().entry(owner) && sw.owned_by(owner, tenancy) &&
                   shm::load_word(e.state) == word && names_address(e);
        },
        dry_run);
}

}  // namespace shmipam::engine
