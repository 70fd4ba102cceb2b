// Healing what a dead invocation left half done. Every ADD and DEL scans the lease table; a
// lease whose holder is dead has its one piece of work (the entry its target names) finished:
//   entry CLAIMING by it  -> its slots go back to FREE, the entry becomes a tombstone (roll back)
//   entry RELEASING by it -> its slots go on to COOLING, the entry becomes a tombstone (forward)
// and then the lease is freed. All of it is CAS on words that name the dead lease's index and
// generation, so racing healers agree and a lease's next holder is never touched.
#pragma once

#include <cstdint>

#include "engine/network_store.h"
#include "shm/lease_table.h"
#include "shm/state_words.h"

namespace shmipam::engine {

// Roll back an attachment claim: every slot the entry references that is still CLAIMING by the
// entry's lease, or already ALLOCATED to the entry, returns to FREE; the entry is retired.
void roll_back_claim(NetworkStore& store, uint64_t entry_index, uint64_t entry_word);

// Complete a release: every slot the entry references that it still owns goes to COOLING; the
// entry is retired.
void complete_release(NetworkStore& store, uint64_t entry_index, uint64_t entry_word);

// Recovers and frees one lease if its holder is dead. True when it was dead.
bool reap_if_dead(NetworkStore& store, uint32_t lease_index, uint64_t lease_word);

// Same, for the lease an entry or slot word names (index and low 16 bits of the generation).
bool reap_named_if_dead(NetworkStore& store, uint16_t lease_index, uint16_t lease_gen);

// Scans the lease table; returns how many dead leases it recovered.
size_t reap_dead_leases(NetworkStore& store);

}  // namespace shmipam::engine
