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
