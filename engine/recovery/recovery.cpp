#include "engine/recovery/recovery.h"

#include <array>
#include <cstring>
#include <vector>

#include "base/clock.h"
#include "base/fault_point.h"
#include "engine/slots/attachment_index.h"
#include "engine/slots/entry_fields.h"
#include "engine/slots/slot_ops.h"
#include "engine/state/journal_records.h"
#include "shm/atomic_word.h"

namespace shmipam::engine {

using format::EntryState;
using format::SlotState;
using shm::EntryWord;
using shm::SlotWord;

namespace {

using RefSnapshot = std::array<format::AddressRef, format::kMaxRangeSets>;

// CAS attempts per slot of a rollback or a release: a lost CAS means a racing healer of the same
// work moved the slot towards the same end state, which takes at most two moves, so the bound
// only stops a livelock.
constexpr int kSlotCasAttempts = 16;

// The entry's refs, copied while the entry is still in the tenancy of `word`: taken before any
// state change so a new tenant's refs are never mistaken for these.
RefSnapshot snapshot_refs(NetworkStore& store, uint64_t entry_index) {
    RefSnapshot snap{};
    const format::Entry& e = store.index().entry(entry_index);
    const size_t n = std::min<size_t>(e.ref_count, format::kMaxRangeSets);
    for (size_t r = 0; r < n; ++r) snap[r] = e.refs[r];
    std::atomic_thread_fence(std::memory_order_acquire);
    return snap;
}

// Calls fn(block, slot) for each referenced slot; false when a block cannot be opened.
template <typename Fn>
bool for_each_ref_slot(NetworkStore& store, const RefSnapshot& refs, Fn&& fn) {
    for (const format::AddressRef& ref : refs) {
        if (ref.family != 4 && ref.family != 6) continue;  // not claimed yet
        const IpAddress a = ref_address(ref);
        auto block = store.block_for(a, false);
        if (!block) return false;
        if (*block == nullptr) continue;  // never created: nothing of ours in it
        fn(**block, store.slot_of(a));
    }
    return true;
}

// A published slot going back: its ALLOC record may be durable, so say it is free again (best
// effort: without it a rebuild would restore an allocation the runtime's DEL then releases).
void journal_rollback(NetworkStore& store, shm::BlockFile& b, uint64_t i, uint64_t w) {
    const auto g = b.geometry();
    const IpAddress base = IpAddress::from_bytes(Family(g.family), g.base);
    const IpAddress a{base.value + i, base.family};
    format::JournalRecord r =
        make_record(format::JournalOp::kRollback, a, g.prefix, 0, SlotWord::decode(w).gen + 1,
                    Fingerprint{}, AttachmentText{}, store.boot_id(), base::unix_ns());
    (void)store.append_journal({&r, 1});
}

// A slot whose releaser is gone, about to turn COOLING: its RELEASE record, written (again) by
// the healer before the transition, so that a rebuild never brings back an attachment whose DEL
// already answered. False when it cannot be written: the slot then stays RELEASING, and the next
// healer tries again (a healer never finishes what it cannot journal).
bool journal_release(NetworkStore& store, shm::BlockFile& b, uint64_t i, uint64_t w) {
    const auto g = b.geometry();
    const IpAddress base = IpAddress::from_bytes(Family(g.family), g.base);
    const IpAddress a{base.value + i, base.family};
    format::JournalRecord r =
        make_record(format::JournalOp::kRelease, a, g.prefix, 0, SlotWord::decode(w).gen + 1,
                    Fingerprint{}, AttachmentText{}, store.boot_id(), base::unix_ns());
    return bool(store.append_journal({&r, 1}));
}

bool same_tenancy_tombstone(uint64_t now, uint64_t observed) {
    const EntryWord n = EntryWord::decode(now), o = EntryWord::decode(observed);
    return n.state == EntryState::kTombstone && n.gen == o.gen;
}

}  // namespace

bool roll_back_claim(NetworkStore& store, uint64_t entry_index, uint64_t entry_word,
                     bool alloc_may_be_journaled) {
    const EntryWord ew = EntryWord::decode(entry_word);
    const RefSnapshot refs = snapshot_refs(store, entry_index);
    // Retire first: from here on the claimer's commit cannot succeed, so slots rolled back below
    // can never belong to a committed attachment.
    const uint64_t now = shm::load_word(store.index().entry(entry_index).state);
    if (now == entry_word) {
        if (!AttachmentIndex(store.index(), nullptr).retire(entry_index, entry_word) &&
            !same_tenancy_tombstone(shm::load_word(store.index().entry(entry_index).state),
                                    entry_word)) {
            return true;  // committed meanwhile (a live claimer) or already a new tenancy
        }
    } else if (!same_tenancy_tombstone(now, entry_word)) {
        return true;
    }
    SHMIPAM_FAULT("heal.after_retire");
    return for_each_ref_slot(store, refs, [&](shm::BlockFile& b, uint64_t i) {
        for (int attempt = 0; attempt < kSlotCasAttempts; ++attempt) {
            const uint64_t w = slot_ops::load_state(b, i);
            const SlotWord sw = SlotWord::decode(w);
            const bool claiming_by_lease =
                sw.state == SlotState::kClaiming && sw.held_by(ew.lease_index, ew.lease_gen);
            const bool published_to_tenancy = sw.owned_by(entry_index, ew.gen);
            if (!claiming_by_lease && !published_to_tenancy) return;
            // The claimer journals ALLOC before it publishes, so a CLAIMING slot's record may be
            // durable too: without a ROLLBACK a rebuild would resurrect an allocation nobody
            // holds (written first; if the CAS then loses, the loop journals the next state).
            if (published_to_tenancy || alloc_may_be_journaled) journal_rollback(store, b, i, w);
            if (slot_ops::roll_back(b, i, w)) {
                SHMIPAM_FAULT("heal.after_slot_rollback");
                return;
            }
        }
    });
}

bool complete_release(NetworkStore& store, uint64_t entry_index, uint64_t entry_word,
                      ReleaseBy by) {
    const EntryWord ew = EntryWord::decode(entry_word);
    if (shm::load_word(store.index().entry(entry_index).state) != entry_word) return true;
    const RefSnapshot refs = snapshot_refs(store, entry_index);
    // 1. Every slot of this tenancy to RELEASING in the releaser's name. Loop until it is, or is
    // not this tenancy's: a racing healer may move it between our load and our CAS, and may die.
    struct Releasing {
        shm::BlockFile* block;
        uint64_t slot;
        uint64_t word;
        IpAddress address;
        size_t set;
    };
    std::vector<Releasing> slots;
    const bool opened = for_each_ref_slot(store, refs, [&](shm::BlockFile& b, uint64_t i) {
        for (int attempt = 0; attempt < kSlotCasAttempts; ++attempt) {
            const uint64_t w = slot_ops::load_state(b, i);
            const SlotWord sw = SlotWord::decode(w);
            if (sw.state == SlotState::kReleasing && sw.held_by(ew.lease_index, ew.lease_gen)) {
                slots.push_back({&b, i, w, {}, 0});
                return;
            }
            if (!sw.owned_by(entry_index, ew.gen)) return;
            uint64_t releasing = 0;
            if (slot_ops::begin_release(b, i, w, ew.lease_index, ew.lease_gen, &releasing)) {
                SHMIPAM_FAULT("del.after_slot_releasing");
                slots.push_back({&b, i, releasing, {}, 0});
                return;
            }
        }
    });
    if (!opened) return false;
    for (auto& r : slots) {
        for (size_t k = 0; k < refs.size(); ++k) {
            const format::AddressRef& ref = refs[k];
            if (ref.family != 4 && ref.family != 6) continue;
            const IpAddress a = ref_address(ref);
            if (store.slot_of(a) == r.slot && store.block_for(a, false).value() == r.block) {
                r.address = a;
                r.set = k;
            }
        }
    }
    // 2. Journal the releases before any of these addresses can be claimed again: no rebuild can
    // then give one to two owners.
    const uint64_t now_unix = base::unix_ns();
    const format::Entry& ent = store.index().entry(entry_index);
    const AttachmentText text{
        std::string(ent.container_id, strnlen(ent.container_id, sizeof ent.container_id)),
        std::string(ent.ifname, strnlen(ent.ifname, sizeof ent.ifname)),
        pod_of(ent),
        ent.flags,
        now_unix,
        held_for_a_name(ent.flags) ? ent.claim.keep_idle : 0};
    const Fingerprint fp = AttachmentIndex::read_fp(ent, entry_word).value_or(Fingerprint{});
    std::vector<format::JournalRecord> records;
    for (const auto& r : slots) {
        records.push_back(make_record(
            format::JournalOp::kRelease, r.address, store.block_prefix(r.address.family), r.set,
            SlotWord::decode(r.word).gen + 1, fp, text, store.boot_id(), now_unix));
    }
    if (!store.append_journal(records)) {
        // Not journaled, so not released: a release may only complete once its record is
        // durable. Only the live owner of the release undoes it, and only while every slot of
        // the tenancy is still RELEASING in its name (nothing was published as free). A healer
        // never does: the dead releaser may have journaled and cooled some slots already, and
        // recommitting the entry would make it name a slot any ADD may take: one address, two
        // owners. The release then stays pending and the next healer finishes it.
        size_t held = 0;
        for (const auto& ref : refs) held += ref.family == 4 || ref.family == 6;
        if (by == ReleaseBy::kHealer || slots.size() != held) return false;
        for (const auto& r : slots) {
            uint64_t w = r.word;
            shm::cas_word(r.block->slot(r.slot).state, w,
                          SlotWord::allocated(r.word, entry_index, ew.gen));
        }
        uint64_t w = entry_word;
        shm::cas_word(store.index().entry(entry_index).state, w,
                      EntryWord::next(entry_word, EntryState::kCommitted, ew.fp16));
        return false;
    }
    // 3. COOLING, then the entry is done.
    const uint64_t now = base::boot_ns();
    for (const auto& r : slots) {
        if (slot_ops::finish_release(*r.block, r.slot, r.word, now)) {
            SHMIPAM_FAULT("del.after_slot_cooling");
        }
    }
    SHMIPAM_FAULT("del.after_release");
    AttachmentIndex(store.index(), nullptr).retire(entry_index, entry_word);
    return true;
}

bool reap_if_dead(NetworkStore& store, uint32_t lease_index, uint64_t lease_word) {
    shm::LeaseTable& leases = store.index().leases();
    if (leases.judge(lease_index, lease_word, store.self()) != shm::Holder::kDead) return false;
    const uint16_t gen = shm::LeaseTable::gen_of(lease_word);
    const uint64_t target = leases.target(lease_index);
    const uint64_t e_plus_one = shm::LeaseTarget::entry_plus_one(target);
    bool healed = true;
    if (e_plus_one != 0 && e_plus_one <= store.index().entry_count()) {
        const uint64_t e = e_plus_one - 1;
        const uint64_t w = shm::load_word(store.index().entry(e).state);
        const EntryWord ew = EntryWord::decode(w);
        if (ew.gen == shm::LeaseTarget::entry_gen(target)) {
            if (ew.state == EntryState::kClaiming && ew.held_by(uint16_t(lease_index), gen)) {
                healed = roll_back_claim(store, e, w);
            } else if (ew.state == EntryState::kReleasing &&
                       ew.held_by(uint16_t(lease_index), gen)) {
                healed = complete_release(store, e, w);
            } else if (ew.state == EntryState::kTombstone) {
                // Retired, perhaps by a healer of this claim that died before its slots were
                // done: finish that rollback (a no-op if they are).
                const uint64_t as_claiming =
                    EntryWord{EntryState::kClaiming, uint16_t(lease_index), gen, ew.gen, ew.fp16}
                        .encode();
                healed = roll_back_claim(store, e, as_claiming);
            }
        }
    }
    if (!healed) return true;  // keep the lease: its work is not finished, the next one retries
    SHMIPAM_FAULT("reap.before_free");
    if (leases.free_if_unchanged(lease_index, lease_word)) {
        shm::bump_counter(store.index().header().dead_leases_reaped);
    }
    return true;
}

bool holder_gone(NetworkStore& store, uint16_t lease_index, uint16_t lease_gen) {
    shm::LeaseTable& leases = store.index().leases();
    if (lease_index >= leases.size()) return true;
    const uint64_t w = leases.word(lease_index);
    if (shm::LeaseTable::pid_of(w) == 0 || shm::LeaseTable::gen_of(w) != lease_gen) return true;
    if (!reap_if_dead(store, lease_index, w)) return false;
    // Dead, but gone only once its lease is free: a reaper that could not finish the holder's
    // work (a journal that cannot be written, a block that cannot be opened) keeps the lease,
    // and nothing the holder left is rolled anywhere meanwhile: a transition made without its
    // record would let a rebuild bring back an allocation, or an attachment whose DEL answered.
    const uint64_t now = leases.word(lease_index);
    return shm::LeaseTable::pid_of(now) == 0 || shm::LeaseTable::gen_of(now) != lease_gen;
}

bool heal_entry_if_orphaned(NetworkStore& store, uint64_t entry_index, uint64_t entry_word) {
    const EntryWord ew = EntryWord::decode(entry_word);
    if (ew.state != EntryState::kClaiming && ew.state != EntryState::kReleasing) return false;
    if (!holder_gone(store, ew.lease_index, ew.lease_gen)) return false;
    if (ew.state == EntryState::kClaiming) {
        roll_back_claim(store, entry_index, entry_word);
    } else {
        complete_release(store, entry_index, entry_word);
    }
    return true;
}

bool allocation_orphaned(NetworkStore& store, const SlotWord& sw) {
    if (sw.state != SlotState::kAllocated) return false;
    if (sw.owner_entry() >= store.index().entry_count()) return true;
    const EntryWord ew =
        EntryWord::decode(shm::load_word(store.index().entry(sw.owner_entry()).state));
    const bool same_tenancy = (ew.gen & SlotWord::kOwnerTenancyMask) == sw.owner_tenancy();
    return !(same_tenancy && ew.live());
}

bool heal_slot_if_orphaned(NetworkStore& store, shm::BlockFile& block, uint64_t slot,
                           uint64_t slot_word) {
    const SlotWord sw = SlotWord::decode(slot_word);
    // Every transition here is journaled like the owner's own. What keeps an address from two
    // owners is the slot generation, not these records: any later owner's ALLOC has a higher
    // generation and wins replay. What they keep is the journal's view equal to the arena's, so
    // that a rebuild does not bring back an allocation nobody holds.
    // `slot_word` was read before the judgement below, which looks at the lease or the entry as
    // they are now: a live holder may have moved the slot on in between (published its claim,
    // committed, freed its lease), and a record journaled for the old word carries the very
    // generation of the slot's new state, newer in sequence, so it would displace that
    // allocation at a rebuild. So the slot is read again after the judgement: a holder settles
    // its slots before it frees its lease, and an entry's tenancy ends only after its slots are
    // let go, so a slot still at `slot_word` then was left by a holder or tenancy that is gone.
    const auto unchanged = [&] { return slot_ops::load_state(block, slot) == slot_word; };
    if (sw.state == SlotState::kAllocated) {
        // Allocated to a tenancy that ended (rolled back by a healer that died before it got
        // to this slot, and the entry reused since): nobody holds it. Best effort, as every
        // ROLLBACK: without it a rebuild restores an allocation GC then releases.
        if (!allocation_orphaned(store, sw)) return false;
        if (!unchanged()) return false;
        journal_rollback(store, block, slot, slot_word);
        return slot_ops::roll_back(block, slot, slot_word);
    }
    if (sw.state != SlotState::kClaiming && sw.state != SlotState::kReleasing) return false;
    if (!holder_gone(store, sw.lease_index, sw.lease_gen)) return false;
    if (!unchanged()) return false;
    // A claim never committed (slots are published before their entry commits; its ALLOC may
    // be durable) and a release always completes.
    if (sw.state == SlotState::kClaiming) {
        journal_rollback(store, block, slot, slot_word);
        slot_ops::roll_back(block, slot, slot_word);
    } else {
        if (!journal_release(store, block, slot, slot_word)) return false;
        slot_ops::finish_release(block, slot, slot_word, base::boot_ns());
    }
    return true;
}

size_t reap_dead_leases(NetworkStore& store) {
    shm::LeaseTable& leases = store.index().leases();
    size_t n = 0;
    leases.for_each_held([&](uint32_t i) {
        const uint64_t w = leases.word(i);
        if (shm::LeaseTable::pid_of(w) != 0 && reap_if_dead(store, i, w)) ++n;
    });
    return n;
}

Expected<SweepReport> sweep(NetworkStore& store) {
    SweepReport rep;
    rep.dead_leases = reap_dead_leases(store);
    shm::IndexFile& idx = store.index();
    for (uint64_t e = 0; e < idx.entry_count(); ++e) {
        const uint64_t w = shm::load_word(idx.entry(e).state);
        if (heal_entry_if_orphaned(store, e, w)) ++rep.entries_healed;
    }
    auto blocks = store.all_blocks();
    if (!blocks) return blocks.error();
    for (shm::BlockFile* b : *blocks) {
        for (uint64_t i = 0; i < b->slot_count(); ++i) {
            const uint64_t w = slot_ops::load_state(*b, i);
            if (heal_slot_if_orphaned(store, *b, i, w)) ++rep.slots_healed;
        }
    }
    return rep;
}

void settle_own_work(NetworkStore& store, const shm::LeaseHandle& lease) {
    const uint64_t target = store.index().leases().target(lease.index);
    const uint64_t e_plus_one = shm::LeaseTarget::entry_plus_one(target);
    if (e_plus_one == 0 || e_plus_one > store.index().entry_count()) return;
    const uint64_t w = shm::load_word(store.index().entry(e_plus_one - 1).state);
    const EntryWord ew = EntryWord::decode(w);
    if (!ew.held_by(uint16_t(lease.index), lease.gen16())) return;
    if (ew.state == EntryState::kClaiming) roll_back_claim(store, e_plus_one - 1, w);
    if (ew.state == EntryState::kReleasing) complete_release(store, e_plus_one - 1, w);
}

}  // namespace shmipam::engine
