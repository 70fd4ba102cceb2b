// Transitions of one address slot, each a single CAS on its state word, plus upkeep of the
// bitmap hint. The state word is the truth; the bitmap only speeds up finding candidates, and
// the allocator falls back to reading slots when the hint says "full" (docs/claim-protocol.md).
#pragma once

#include <cstdint>

#include "shm/block_file.h"
#include "shm/codec.h"
#include "shm/lease_table.h"

namespace shmipam::engine::slot_ops {

using format::SlotState;

// States whose bit is set in the hint: not claimable.
inline bool busy(SlotState s) {
    return s != SlotState::kFree && s != SlotState::kCooling;
}

uint64_t load_state(const shm::BlockFile& b, uint64_t i);

// Brings slot i's hint bit in line with its state (re-checking until it holds or another actor
// changed the state, in which case that actor fixes the bit).
void sync_hint(shm::BlockFile& b, uint64_t i);

// FREE or COOLING (expected) -> CLAIMING by the lease. False when the word changed meanwhile.
bool claim(shm::BlockFile& b, uint64_t i, uint64_t expected, const shm::LeaseHandle& lease,
           uint64_t* claimed_word);

// CLAIMING -> ALLOCATED to (entry, tenancy), the owner carried in the word itself; the display
// fields (owner word with the range set, fingerprint, time) are written first.
bool publish(shm::BlockFile& b, uint64_t i, uint64_t claimed_word, uint64_t entry_index,
             size_t range_set, uint16_t tenancy, uint64_t owner_fp, uint64_t now_unix_ns);

// Any state -> FREE (rollback of a claim), if still `expected`; COOLING instead when the address
// was released before, so an aborted claim of a cooling address does not cut its cool-down.
bool roll_back(shm::BlockFile& b, uint64_t i, uint64_t expected);

// ALLOCATED -> RELEASING by the lease (a driver); RELEASING -> COOLING stamped with now.
bool begin_release(shm::BlockFile& b, uint64_t i, uint64_t expected, uint16_t lease_index,
                   uint16_t lease_gen, uint64_t* releasing_word);
bool finish_release(shm::BlockFile& b, uint64_t i, uint64_t releasing_word, uint64_t now_boot_ns);

}  // namespace shmipam::engine::slot_ops
