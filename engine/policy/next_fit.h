// The allocation policy: which address of a range set to take. Next-fit from the set's cursor
// (host-local's round-robin order), skipping addresses that are cooling down; when only cooling
// addresses remain, the one released longest ago. Exhaustion is declared only after an
// exhaustive pass (the scanner reads the slots themselves), so a stale hint never loses an
// address. The policy decides the order; the slot scanner (engine/slots/slot_scanner.h) decides
// whether an address can be had.
#pragma once

#include <cstdint>
#include <functional>

#include "engine/addr/range.h"
#include "engine/slots/slot_scanner.h"
#include "engine/state/network_store.h"
#include "shm/lease_table.h"

namespace shmipam::engine {

struct ClaimedSlot {
    shm::BlockFile* block = nullptr;
    uint64_t slot = 0;
    uint64_t word = 0;  // the CLAIMING word we wrote
    IpAddress address;
};

struct ClaimContext {
    SlotScanner& scanner;
    // Each range set's next-fit cursor (format.h: the index header's, shared by every process).
    uint64_t* cursors;
    uint64_t reuse_delay_ns = 0;
    uint64_t now_boot_ns = 0;
    // Called with the address right before the CAS that would claim it, so the attachment's
    // entry names the slot before the slot names the lease (a healer finds it either way).
    std::function<void(const IpAddress&)> before_claim;
};

// Claims the next address of range set `set_index`. kNoAddressFree when none is left.
Expected<ClaimedSlot> claim_next(ClaimContext& ctx, const RangeSet& set, size_t set_index);

// Claims exactly `address` (explicit requests bypass the cool-down).
Expected<ClaimedSlot> claim_requested(ClaimContext& ctx, const RangeSet& set,
                                      const IpAddress& address);

// The cursor value that makes the next search start right after `last` (host-local's
// last_reserved_ip); 0 when `last` is not in the set.
uint64_t cursor_after(const RangeSet& set, const IpAddress& last);

// Whether range set `set` could serve an ADD now (a free or cooling address exists). Read only.
Expected<bool> can_serve(NetworkStore& store, const RangeSet& set);

}  // namespace shmipam::engine
