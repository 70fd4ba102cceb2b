// Encoding and decoding of the slot and entry state words (bit layouts in format.h).
#pragma once

#include <cstdint>

#include "shm/format.h"

namespace shmipam::shm {

struct SlotWord {
    format::SlotState state = format::SlotState::kFree;
    uint16_t lease_index = 0;
    uint16_t lease_gen = 0;
    uint32_t gen = 0;

    static SlotWord decode(uint64_t w) {
        SlotWord s;
        s.state = format::SlotState(w & ((1u << format::kSlotStateBits) - 1));
        s.lease_index =
            uint16_t((w >> format::kLeaseIndexShift) & ((1u << format::kLeaseIndexBits) - 1));
        s.lease_gen = uint16_t(w >> format::kLeaseGenShift);
        s.gen = uint32_t(w >> format::kSlotGenShift);
        return s;
    }
    uint64_t encode() const {
        return uint64_t(state) | (uint64_t(lease_index) << format::kLeaseIndexShift) |
               (uint64_t(lease_gen) << format::kLeaseGenShift) |
               (uint64_t(gen) << format::kSlotGenShift);
    }
    // The word after a transition to `to`, driven by lease (index, gen) or by nobody (0, 0).
    static uint64_t next(uint64_t cur, format::SlotState to, uint16_t lease_index = 0,
                         uint16_t lease_gen = 0) {
        SlotWord s = decode(cur);
        return SlotWord{to, lease_index, lease_gen, s.gen + 1}.encode();
    }
    bool held_by(uint16_t index, uint16_t gen16) const {
        return lease_index == index && lease_gen == gen16;
    }

    // ALLOCATED words carry their owner where CLAIMING and RELEASING words carry the lease: the
    // entry index (17 bits) and the low 11 bits of the entry's tenancy generation. The owner is
    // thereby published by the one CAS that allocates, and no later write can change it.
    static constexpr uint32_t kOwnerEntryBits = 17;
    static constexpr uint32_t kOwnerEntryMask = (1u << kOwnerEntryBits) - 1;
    static constexpr uint32_t kOwnerTenancyMask = (1u << (28 - kOwnerEntryBits)) - 1;
    static uint64_t allocated(uint64_t cur, uint64_t entry_index, uint16_t tenancy) {
        const uint32_t bits = (uint32_t(entry_index) & kOwnerEntryMask) |
                              ((uint32_t(tenancy) & kOwnerTenancyMask) << kOwnerEntryBits);
        return SlotWord{format::SlotState::kAllocated, uint16_t(bits & 0xFFF), uint16_t(bits >> 12),
                        decode(cur).gen + 1}
            .encode();
    }
    uint32_t owner_entry() const {
        return (uint32_t(lease_index) | (uint32_t(lease_gen) << 12)) & kOwnerEntryMask;
    }
    uint16_t owner_tenancy() const {
        return uint16_t((uint32_t(lease_index) | (uint32_t(lease_gen) << 12)) >> kOwnerEntryBits);
    }
    // Allocated to this tenancy of the entry (compared on the 11 tenancy bits the word holds).
    bool owned_by(uint64_t entry_index, uint16_t tenancy) const {
        return state == format::SlotState::kAllocated && owner_entry() == entry_index &&
               owner_tenancy() == (tenancy & kOwnerTenancyMask);
    }
};

struct EntryWord {
    format::EntryState state = format::EntryState::kEmpty;
    uint16_t lease_index = 0;
    uint16_t lease_gen = 0;
    uint16_t gen = 0;
    uint16_t fp16 = 0;

    static EntryWord decode(uint64_t w) {
        EntryWord e;
        e.state = format::EntryState(w & 0xF);
        e.lease_index =
            uint16_t((w >> format::kLeaseIndexShift) & ((1u << format::kLeaseIndexBits) - 1));
        e.lease_gen = uint16_t(w >> format::kLeaseGenShift);
        e.gen = uint16_t(w >> format::kEntryGenShift);
        e.fp16 = uint16_t(w >> format::kEntryFpShift);
        return e;
    }
    uint64_t encode() const {
        return uint64_t(state) | (uint64_t(lease_index) << format::kLeaseIndexShift) |
               (uint64_t(lease_gen) << format::kLeaseGenShift) |
               (uint64_t(gen) << format::kEntryGenShift) |
               (uint64_t(fp16) << format::kEntryFpShift);
    }
    // The generation counts tenancies: it changes when an entry is claimed for a new attachment
    // and is kept through that tenancy (CLAIMING -> COMMITTED -> RELEASING -> TOMBSTONE never
    // repeats a word), so the fingerprint stamped with it stays valid for the whole tenancy.
    static uint64_t next(uint64_t cur, format::EntryState to, uint16_t fp16,
                         uint16_t lease_index = 0, uint16_t lease_gen = 0) {
        EntryWord e = decode(cur);
        const uint16_t gen = to == format::EntryState::kClaiming ? uint16_t(e.gen + 1) : e.gen;
        return EntryWord{to, lease_index, lease_gen, gen, fp16}.encode();
    }
    bool held_by(uint16_t index, uint16_t gen16) const {
        return lease_index == index && lease_gen == gen16;
    }
    bool live() const {
        return state == format::EntryState::kClaiming || state == format::EntryState::kCommitted ||
               state == format::EntryState::kReleasing;
    }
};

}  // namespace shmipam::shm
