// verify: every invariant of the arenas, the index and the journal, each violation named by a
// stable kind. Read-only.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include "base/clock.h"
#include "engine/inspect/inspect.h"
#include "engine/slots/attachment_index.h"
#include "engine/slots/block_map.h"
#include "engine/slots/entry_fields.h"
#include "engine/slots/slot_ops.h"
#include "engine/state/journal_records.h"
#include "shm/atomic_word.h"
#include "shm/codec.h"
#include "shm/journal.h"

namespace shmipam::engine {

using format::EntryState;
using format::SlotState;
using shm::EntryWord;
using shm::SlotWord;

namespace {

// Whether the lease (index, low 16 bits of gen) is held by a live process right now.
bool lease_live(NetworkStore& store, uint16_t index, uint16_t gen) {
    auto& leases = store.index().leases();
    if (index >= leases.size()) return false;
    const uint64_t w = leases.word(index);
    if (shm::LeaseTable::pid_of(w) == 0 || shm::LeaseTable::gen_of(w) != gen) return false;
    return leases.judge(index, w, store.self()) == shm::Holder::kAlive;
}

std::string attachment_of(const format::JournalRecord& r) {
    return fixed(r.container_id, sizeof r.container_id) + "/" + fixed(r.ifname, sizeof r.ifname);
}

// The journal's own view, which a rebuild will act on, not the arena's: per address, in replay
// order (slot generation, then sequence), an ALLOC while the address is still allocated in the
// same boot to another attachment means two owners at once. The arena alone cannot show this: a
// rebuild that reclaimed a live allocation leaves an arena consistent with itself, and only the
// journal still names the first owner. An earlier boot's ALLOC is not live
// (a rebuild reclaims it) unless it is a claim's, which a rebuild keeps (kEntryFlagClaim).
// Fixed addresses (docs/fixed-ips.md): a sandbox entry using a claim holds no slot, and a claim
// bound to a sandbox is bound to a live sandbox entry that names it (the order of ADD's and DEL's
// steps keeps this through any crash: a sandbox binds after its commit and unbinds before its
// release).
template <typename Add>
void check_claim_binding(shm::IndexFile& idx, uint64_t e, uint16_t tenancy, const std::string& name,
                         Add&& add) {
    const format::Entry& ent = idx.entry(e);
    if (uses_a_claim(ent.flags) && ent.ref_count != 0) {
        add("sandbox-holds-addresses", name + " uses a claim but names addresses of its own");
    }
    if (!held_for_a_name(ent.flags)) return;
    const shm::ClaimBinding b = shm::ClaimBinding::decode(shm::load_word(ent.claim.binding));
    if (b.kind != shm::ClaimBinding::Kind::kBound) return;
    const std::string who = name + " (a claim) is bound to entry " + std::to_string(b.entry);
    if (b.entry >= idx.entry_count()) {
        add("claim-bound-to-nothing", who + ", past the index");
        return;
    }
    const format::Entry& s = idx.entry(b.entry);
    const EntryWord sw = EntryWord::decode(shm::load_word(s.state));
    if (sw.state != EntryState::kCommitted || sw.gen != b.tenancy || !uses_a_claim(s.flags)) {
        add("claim-bound-to-nothing", who + ", which is not a live sandbox of it");
        return;
    }
    if (s.bound_claim != shm::encode_bound_claim(e, tenancy)) {
        add("claim-bound-to-stranger", who + ", which names another claim");
    }
}

template <typename Add>
void check_journal_history(const std::vector<format::JournalRecord>& records, Add&& add) {
    std::map<std::pair<uint8_t, u128>, std::vector<const format::JournalRecord*>> by_address;
    for (const auto& r : records) {
        by_address[{r.family, record_address(r).value}].push_back(&r);
    }
    for (auto& [key, recs] : by_address) {
        std::sort(recs.begin(), recs.end(), [](const auto* x, const auto* y) {
            return std::tie(x->slot_gen, x->sequence) < std::tie(y->slot_gen, y->sequence);
        });
        const format::JournalRecord* live = nullptr;  // the ALLOC holding it, if any
        for (const format::JournalRecord* r : recs) {
            if (r->op != uint8_t(format::JournalOp::kAlloc)) {
                live = nullptr;
                continue;
            }
            const bool still_live =
                live != nullptr &&
                (std::memcmp(live->boot_id, r->boot_id, 16) == 0 || held_for_a_name(live->flags));
            if (still_live && (live->fp1 != r->fp1 || live->fp2 != r->fp2)) {
                add("journal-duplicate",
                    record_address(*r).to_string() + " was allocated to " + attachment_of(*r) +
                        " (record " + std::to_string(r->sequence) +
                        ") while the journal still had it allocated to " + attachment_of(*live) +
                        " (record " + std::to_string(live->sequence) + ")");
            }
            live = r;
        }
    }
}

}  // namespace

Expected<VerifyReport> verify(NetworkStore& store) {
    VerifyReport rep;
    auto add = [&](std::string kind, std::string detail) {
        rep.violations.push_back({std::move(kind), std::move(detail)});
    };
    shm::IndexFile& idx = store.index();

    // Leases held by dead processes: their work was never healed.
    auto& leases = idx.leases();
    for (uint32_t i = 0; i < leases.size(); ++i) {
        const uint64_t w = leases.word(i);
        if (shm::LeaseTable::pid_of(w) == 0) continue;
        if (leases.judge(i, w, store.self()) == shm::Holder::kDead) {
            add("dead-lease", "lease " + std::to_string(i) + " is held by dead pid " +
                                  std::to_string(shm::LeaseTable::pid_of(w)));
        }
    }

    // Entries: consistent states, fingerprints, references.
    std::map<std::pair<int, u128>, uint64_t> address_owner;  // address -> committed entry
    std::set<std::pair<uint64_t, uint64_t>> seen_fps;
    for (uint64_t e = 0; e < idx.entry_count(); ++e) {
        const format::Entry& ent = idx.entry(e);
        const uint64_t w = shm::load_word(ent.state);
        const EntryWord ew = EntryWord::decode(w);
        if (ew.state == EntryState::kEmpty || ew.state == EntryState::kTombstone) continue;
        ++rep.entries_checked;
        const std::string name = "entry " + std::to_string(e) + " (" +
                                 fixed(ent.container_id, sizeof ent.container_id) + "/" +
                                 fixed(ent.ifname, sizeof ent.ifname) + ")";
        if (int(ew.state) > int(EntryState::kTombstone)) {
            add("invalid-entry-state", name + " has state " + std::to_string(int(ew.state)));
            continue;
        }
        if (ew.state == EntryState::kClaiming || ew.state == EntryState::kReleasing) {
            if (!lease_live(store, ew.lease_index, ew.lease_gen)) {
                add("stuck-entry",
                    name + " is " + (ew.state == EntryState::kClaiming ? "claiming" : "releasing") +
                        " for a lease whose holder is gone");
            }
            continue;
        }
        auto fp = AttachmentIndex::read_fp(ent, w);
        if (!fp) {
            add("bad-fingerprint", name + " is committed but its fingerprint is not stamped");
            continue;
        }
        if (!seen_fps.insert({fp->fp1, fp->fp2}).second) {
            add("duplicate-attachment", name + " is committed twice in the index");
        }
        check_claim_binding(idx, e, ew.gen, name, add);
        const size_t n = std::min<size_t>(ent.ref_count, format::kMaxRangeSets);
        for (size_t r = 0; r < n; ++r) {
            const format::AddressRef& ref = ent.refs[r];
            if (ref.family != 4 && ref.family != 6) {
                // host-local's state may have had fewer range sets than today's config.
                if ((ent.flags & (format::kEntryFlagImported | format::kEntryFlagPartial)) == 0) {
                    add("missing-ref", name + " has no address for range set " + std::to_string(r));
                }
                continue;
            }
            const IpAddress a = ref_address(ref);
            auto [it, fresh] = address_owner.insert({{int(a.family), a.value}, e});
            if (!fresh) {
                add("duplicate-address", a.to_string() + " is held by " + name + " and by entry " +
                                             std::to_string(it->second));
            }
            auto block = store.block_for(a, false);
            if (!block) return block.error();
            if (*block == nullptr) {
                add("dangling-ref",
                    name + " holds " + a.to_string() + " whose block does not exist");
                continue;
            }
            const uint64_t s = store.slot_of(a);
            const SlotWord sw = SlotWord::decode(slot_ops::load_state(**block, s));
            if (!sw.owned_by(e, ew.gen)) {
                add("dangling-ref", name + " holds " + a.to_string() + " but its slot is " +
                                        slot_state_name(sw.state) +
                                        (sw.state == SlotState::kAllocated
                                             ? " owned by entry " + std::to_string(sw.owner_entry())
                                             : std::string()));
            }
        }
    }

    // The journal: every allocated address must survive a rebuild, so its newest record must be
    // its allocation, by the same attachment.
    // A journal file that cannot be read is listed, and everything else is still checked.
    auto scan = shm::Journal::scan(
        store.journal().dir(), UINT64_MAX, [&](const shm::Journal::FileDamage& d) {
            add("damaged-journal-file", d.path + " cannot be read (" + d.why +
                                            "): a rebuild would refuse to go on without it");
        });
    if (!scan) return scan.error();
    rep.journal_records = scan->records.size();
    rep.journal_invalid = scan->invalid;
    rep.journal_strays = scan->strays;
    const auto newest = newest_records(scan->records);
    check_journal_history(scan->records, add);

    // Slots: valid states, owners that hold them, no stuck transitions.
    auto blocks = store.all_blocks();
    if (!blocks) return blocks.error();
    for (shm::BlockFile* b : *blocks) {
        const IpAddress base = block_base_of(*b);
        for (uint64_t i = 0; i < b->slot_count(); ++i) {
            ++rep.slots_checked;
            const uint64_t w = slot_ops::load_state(*b, i);
            const SlotWord sw = SlotWord::decode(w);
            const IpAddress a{base.value + i, base.family};
            const bool bit = (shm::load_word(b->bitmap()[i / 64]) >> (i % 64)) & 1;
            if (bit != slot_ops::busy(sw.state)) ++rep.hint_mismatches;
            if (int(sw.state) > int(SlotState::kSticky)) {
                add("invalid-slot-state",
                    a.to_string() + " has state " + std::to_string(int(sw.state)));
                continue;
            }
            if (sw.state == SlotState::kClaiming || sw.state == SlotState::kReleasing) {
                if (!lease_live(store, sw.lease_index, sw.lease_gen)) {
                    add(sw.state == SlotState::kClaiming ? "stuck-claim" : "stuck-release",
                        a.to_string() + " is " + slot_state_name(sw.state) +
                            " for a lease whose holder is gone");
                }
                continue;
            }
            if (sw.state != SlotState::kAllocated) continue;
            if (!journaled_as_allocation(newest, a, shm::load_word(b->slot(i).owner_fp))) {
                add("unjournaled-allocation",
                    a.to_string() +
                        " is allocated but the journal's newest record for it is "
                        "not that allocation: a rebuild would lose it");
            }
            const uint64_t owner = uint64_t(sw.owner_entry()) + 1;
            if (shm::SlotOwner::entry_plus_one(shm::load_word(b->slot(i).owner)) != owner) {
                add("owner-mismatch", a.to_string() + " is allocated to entry " +
                                          std::to_string(owner - 1) +
                                          " but its owner field names another");
            }
            auto it = address_owner.find({int(a.family), a.value});
            if (it != address_owner.end() && it->second + 1 == owner) continue;
            // Allocated to an entry that is still being claimed by a live ADD is fine.
            if (owner != 0 && owner <= idx.entry_count()) {
                const EntryWord ew = EntryWord::decode(shm::load_word(idx.entry(owner - 1).state));
                if (ew.state == EntryState::kClaiming &&
                    lease_live(store, ew.lease_index, ew.lease_gen)) {
                    continue;
                }
            }
            add("orphan-allocation",
                a.to_string() + " is allocated but no committed attachment holds it");
        }
    }

    // The other direction: an allocation of this boot (or a claim's, of any boot) that the
    // journal's newest record keeps but the arena does not hold. A rebuild would bring it back
    // for an attachment the runtime may have deleted, or beside the address's new owner.
    for (const auto& [key, r] : newest) {
        if (r->op != uint8_t(format::JournalOp::kAlloc) ||
            (std::memcmp(r->boot_id, store.boot_id().data(), 16) != 0 &&
             !held_for_a_name(r->flags))) {
            continue;
        }
        const IpAddress a = record_address(*r);
        auto block = store.block_for(a, false);
        if (!block) return block.error();
        const SlotState st =
            *block == nullptr
                ? SlotState::kFree
                : SlotWord::decode(slot_ops::load_state(**block, store.slot_of(a))).state;
        if (st == SlotState::kAllocated || st == SlotState::kClaiming ||
            st == SlotState::kReleasing) {
            continue;  // held, or a transition verify judges above
        }
        add("unapplied-journal-allocation",
            a.to_string() + " is " + slot_state_name(st) + " but the journal's newest record (" +
                std::to_string(r->sequence) + ") allocates it to " + attachment_of(*r) +
                ": a rebuild would bring it back");
    }
    return rep;
}

}  // namespace shmipam::engine
