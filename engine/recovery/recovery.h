// Healing what a dead invocation left half done. Every ADD and DEL scans the lease table; a
// lease whose holder is dead has its one piece of work (the entry tenancy its target names)
// finished:
//   entry CLAIMING by it  -> the entry becomes a tombstone, its slots go back to FREE (roll back)
//   entry RELEASING by it -> its slots go on to COOLING, the entry becomes a tombstone (forward)
// and then the lease is freed. Work that names a lease whose holder is gone (freed or reused
// lease, e.g. after a healer itself died) is healed directly by whoever meets it. Every step is
// a CAS on words naming the lease's index and generation and the entry's tenancy generation, so
// racing healers agree and nothing of a later holder or tenant is ever touched.
#pragma once

#include <cstdint>

#include "engine/slots/slot_scanner.h"
#include "engine/state/network_store.h"
#include "shm/codec.h"
#include "shm/lease_table.h"

namespace shmipam::engine {

// Roll back an attachment claim observed as `entry_word` (CLAIMING): the entry is retired, then
// every slot it referenced that is still CLAIMING by its lease, or ALLOCATED to this tenancy,
// returns to FREE. Also finishes a rollback a dead healer left (entry already retired, same
// tenancy). False when a block could not be opened (nothing is given up then).
// alloc_may_be_journaled: the claimer may have journaled ALLOC for its CLAIMING slots (a healer
// cannot know; the claimer itself knows it has not when it fails before its append), so each is
// journaled as rolled back too.
bool roll_back_claim(NetworkStore& store, uint64_t entry_index, uint64_t entry_word,
                     bool alloc_may_be_journaled = true);

// Who completes a release: the DEL (or operator release) that began it, alive, or a healer of
// one whose holder is gone.
enum class ReleaseBy { kOwner, kHealer };

// Complete a release observed as `entry_word` (RELEASING): every slot of this tenancy goes to
// RELEASING, the releases are journaled, the slots go to COOLING, the entry is retired. False
// when a block could not be opened, or when the journal could not be written. Then the owner
// undoes its release (slots ALLOCATED, entry COMMITTED again) if every slot is still RELEASING
// in its name; otherwise, and always for a healer, the release stays pending for the next
// healer (a release may only complete once journaled, and may only be undone whole).
bool complete_release(NetworkStore& store, uint64_t entry_index, uint64_t entry_word,
                      ReleaseBy by = ReleaseBy::kHealer);

// Whether the holder of lease (index, low 16 bits of its generation) is gone: the lease was
// freed or passed on, or its holder is dead (then its work is recovered and the lease freed).
bool holder_gone(NetworkStore& store, uint16_t lease_index, uint16_t lease_gen);

// An entry observed CLAIMING / RELEASING: if its holder is gone, heal it. True when healed (or
// already changed): look again.
bool heal_entry_if_orphaned(NetworkStore& store, uint64_t entry_index, uint64_t entry_word);

// Whether an ALLOCATED slot's owner tenancy has ended (no live entry of that tenancy).
bool allocation_orphaned(NetworkStore& store, const shm::SlotWord& sw);

// A slot observed CLAIMING / RELEASING: if its holder is gone, roll it back / forward. A slot
// observed ALLOCATED to a tenancy that ended: back to FREE.
bool heal_slot_if_orphaned(NetworkStore& store, shm::BlockFile& block, uint64_t slot,
                           uint64_t slot_word);

// heal_slot_if_orphaned for the slot scanner (engine/slots/slot_scanner.h).
inline SlotHealer slot_healer(NetworkStore& store) {
    return [&store](shm::BlockFile& block, uint64_t slot, uint64_t word) {
        return heal_slot_if_orphaned(store, block, slot, word);
    };
}

// Recovers and frees one lease if its holder is dead. True when it was dead.
bool reap_if_dead(NetworkStore& store, uint32_t lease_index, uint64_t lease_word);

// Scans the lease table; returns how many dead leases it recovered.
size_t reap_dead_leases(NetworkStore& store);

// A full sweep (shmipamctl repair): dead leases, then every entry and slot left mid-transition
// by an invocation that is gone, and allocations of tenancies that ended.
struct SweepReport {
    size_t dead_leases = 0;
    size_t entries_healed = 0;
    size_t slots_healed = 0;
};
Expected<SweepReport> sweep(NetworkStore& store);

// Before an invocation frees its own lease: finish any work it leaves (an error path that did
// not roll back), so a freed lease never names unfinished work.
void settle_own_work(NetworkStore& store, const shm::LeaseHandle& lease);

}  // namespace shmipam::engine
