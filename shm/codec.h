// The codec: every packing of a shared word, in one place. format.h says where each word lives
// and names its bit fields; this header packs and unpacks them (LevelDB's split between
// log_format.h and its writer). Nothing else shifts or masks a shared word.
//   SlotWord, EntryWord   the state words of address slots and attachment entries
//   LeaseWord             a lease: holder pid, lease generation, pid-namespace hash, start time
//   stamp                 a side field (or an entry's fp1) stamped with whose it is
//   LeaseTarget           the entry a lease holder works on
//   SlotOwner             an allocated slot's display owner field
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <utility>

#include "shm/format.h"

namespace shmipam::shm {

// ---- stamps ---------------------------------------------------------------------------------
// A field written by the holder of lease generation g (or an entry's fp1, by its tenancy g)
// carries g in its top 16 bits: a reader that expects g and finds another knows the field is
// an earlier writer's, not garbage of the current one.
namespace stamp {
inline constexpr unsigned kShift = 48;
inline constexpr uint64_t kValueMask = (uint64_t{1} << kShift) - 1;
constexpr uint64_t pack(uint16_t gen, uint64_t value) {
    return (uint64_t(gen) << kShift) | (value & kValueMask);
}
constexpr uint16_t gen_of(uint64_t field) {
    return uint16_t(field >> kShift);
}
constexpr uint64_t value_of(uint64_t field) {
    return field & kValueMask;
}
// The value if the field was stamped by `gen`, else 0.
constexpr uint64_t value_if_stamped_by(uint16_t gen, uint64_t field) {
    return gen_of(field) == gen ? value_of(field) : 0;
}
}  // namespace stamp

// ---- lease words ----------------------------------------------------------------------------
// pid (bits 0..kLeasePidBits) | generation | pid-namespace hash | start time (format.h).
struct LeaseWord {
    static constexpr uint64_t kPidMask = (uint64_t{1} << format::kLeasePidBits) - 1;
    static constexpr uint64_t kStartMask = (uint64_t{1} << (64 - format::kLeaseStartShift)) - 1;
    static constexpr uint64_t kNsMask =
        (uint64_t{1} << (format::kLeaseStartShift - format::kLeaseNsShift)) - 1;

    static constexpr pid_t pid_of(uint64_t w) { return pid_t(w & kPidMask); }
    static constexpr uint16_t gen_of(uint64_t w) {
        return uint16_t(w >> format::kLeaseWordGenShift);
    }
    static constexpr uint64_t start_of(uint64_t w) { return w >> format::kLeaseStartShift; }
    static constexpr uint64_t ns_of(uint64_t w) { return (w >> format::kLeaseNsShift) & kNsMask; }
    static constexpr uint64_t ns_hash(uint64_t tag) {
        return (tag ^ (tag >> 4) ^ (tag >> 8) ^ (tag >> 12) ^ (tag >> 16) ^ (tag >> 24)) & kNsMask;
    }
    static constexpr uint64_t make(pid_t pid, uint16_t gen, uint64_t pidns_tag,
                                   uint64_t start_ticks) {
        return (uint64_t(pid) & kPidMask) | (uint64_t(gen) << format::kLeaseWordGenShift) |
               (ns_hash(pidns_tag) << format::kLeaseNsShift) |
               ((start_ticks & kStartMask) << format::kLeaseStartShift);
    }
    // A free lease keeps its generation, so the next holder's is new.
    static constexpr uint64_t free(uint16_t gen) {
        return uint64_t(gen) << format::kLeaseWordGenShift;
    }
};

// ---- lease targets --------------------------------------------------------------------------
// (entry index + 1) | entry tenancy generation << 32; 0: no target.
struct LeaseTarget {
    static constexpr uint64_t pack(uint64_t entry_index, uint16_t entry_gen) {
        return (entry_index + 1) | (uint64_t(entry_gen) << 32);
    }
    static constexpr uint64_t entry_plus_one(uint64_t t) { return t & 0xFFFFFFFFu; }
    static constexpr uint16_t entry_gen(uint64_t t) { return uint16_t(t >> 32); }
};

// ---- slot owner fields ----------------------------------------------------------------------
// The display owner of an allocated slot: (entry + 1) | range set << 32 | tenancy gen << 40.
struct SlotOwner {
    static constexpr uint64_t pack(uint64_t entry_index, size_t range_set, uint16_t entry_gen) {
        return (entry_index + 1) | (uint64_t(range_set & 0xFF) << 32) | (uint64_t(entry_gen) << 40);
    }
    static constexpr uint64_t entry_plus_one(uint64_t owner) { return owner & 0xFFFFFFFFu; }
    static constexpr size_t range_set(uint64_t owner) { return size_t((owner >> 32) & 0xFF); }
    static constexpr uint16_t entry_gen(uint64_t owner) { return uint16_t(owner >> 40); }
};

// ---- slot and entry state words -------------------------------------------------------------

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

// A claim's binding word (format.h, ClaimFields::binding).
struct ClaimBinding {
    enum class Kind : uint8_t { kUnknownSandbox = 0, kBound = 1, kIdle = 2, kExpiring = 3 };
    Kind kind = Kind::kUnknownSandbox;
    uint32_t entry = 0;    // kBound: the sandbox entry's index
    uint16_t tenancy = 0;  // kBound: its tenancy
    uint64_t since_s = 0;  // kIdle: unix seconds

    static ClaimBinding decode(uint64_t w) {
        ClaimBinding b;
        b.kind = Kind(w >> 62);
        if (b.kind == Kind::kBound) {
            b.entry = uint32_t(w) - 1;
            b.tenancy = uint16_t(w >> 32);
        } else if (b.kind == Kind::kIdle) {
            b.since_s = w & ((uint64_t{1} << 62) - 1);
        }
        return b;
    }
    static uint64_t bound(uint64_t entry_index, uint16_t tenancy) {
        return (uint64_t(Kind::kBound) << 62) | (uint64_t(tenancy) << 32) | (entry_index + 1);
    }
    static uint64_t idle(uint64_t since_unix_s) {
        return (uint64_t(Kind::kIdle) << 62) | (since_unix_s & ((uint64_t{1} << 62) - 1));
    }
    static uint64_t expiring() { return uint64_t(Kind::kExpiring) << 62; }
};

// The index header's claim_due word (format.h).
struct ClaimDue {
    static constexpr uint64_t kDueMask = (uint64_t{1} << 48) - 1;
    uint64_t due_s = 0;  // 0: none pending
    uint16_t changes = 0;

    static ClaimDue decode(uint64_t w) { return {w & kDueMask, uint16_t(w >> 48)}; }
    uint64_t encode() const { return (uint64_t(changes) << 48) | (due_s & kDueMask); }
    // The word after lowering it to v (always counted as a change).
    static uint64_t lowered(uint64_t w, uint64_t v) {
        const ClaimDue d = decode(w);
        const uint64_t due = d.due_s == 0 || v < d.due_s ? v : d.due_s;
        return ClaimDue{due, uint16_t(d.changes + 1)}.encode();
    }
};

// A sandbox entry's bound_claim (format.h): the claim entry's index + 1 and tenancy.
inline uint64_t encode_bound_claim(uint64_t claim_index, uint16_t tenancy) {
    return (uint64_t(tenancy) << 32) | (claim_index + 1);
}
inline std::pair<uint64_t, uint16_t> decode_bound_claim(uint64_t w) {
    return {uint64_t(uint32_t(w)) - 1, uint16_t(w >> 32)};
}

}  // namespace shmipam::shm
