#include "engine/slots/slot_ops.h"

#include "shm/atomic_word.h"

namespace shmipam::engine::slot_ops {

using shm::SlotWord;

namespace {

// Rounds of bringing a hint bit in line with its slot: a state that changes meanwhile has a new
// actor, who brings the bit in line after its own change, so a few rounds only cover changes in
// quick succession (a stale bit costs a slot read, never correctness).
constexpr int kHintSyncRounds = 4;

}  // namespace

uint64_t load_state(const shm::BlockFile& b, uint64_t i) {
    return shm::load_word(b.slot(i).state);
}

void sync_hint(shm::BlockFile& b, uint64_t i) {
    uint64_t& word = b.bitmap()[i / 64];
    const uint64_t bit = uint64_t{1} << (i % 64);
    for (int attempt = 0; attempt < kHintSyncRounds; ++attempt) {
        const uint64_t w = load_state(b, i);
        if (busy(SlotWord::decode(w).state)) {
            if ((shm::load_word(word) & bit) == 0) shm::fetch_or_word(word, bit);
        } else {
            if ((shm::load_word(word) & bit) != 0) shm::fetch_and_word(word, ~bit);
        }
        if (load_state(b, i) == w) return;
    }
}

bool claim(shm::BlockFile& b, uint64_t i, uint64_t expected, const shm::LeaseHandle& lease,
           uint64_t* claimed_word) {
    const uint64_t desired =
        SlotWord::next(expected, SlotState::kClaiming, uint16_t(lease.index), lease.gen16());
    uint64_t e = expected;
    if (!shm::cas_word(b.slot(i).state, e, desired)) {
        shm::bump_counter(b.header().cas_retries);
        return false;
    }
    sync_hint(b, i);
    *claimed_word = desired;
    return true;
}

bool publish(shm::BlockFile& b, uint64_t i, uint64_t claimed_word, uint64_t entry_index,
             size_t range_set, uint16_t tenancy, uint64_t owner_fp, uint64_t now_unix_ns) {
    format::Slot& s = b.slot(i);
    // Only while the slot is still ours (display fields only: ownership is in the word).
    if (shm::load_word(s.state) != claimed_word) return false;
    shm::store_word(s.owner, shm::SlotOwner::pack(entry_index, range_set, tenancy),
                    std::memory_order_relaxed);
    shm::store_word(s.owner_fp, owner_fp, std::memory_order_relaxed);
    shm::store_word(s.allocated_unix_ns, now_unix_ns, std::memory_order_relaxed);
    uint64_t e = claimed_word;
    if (!shm::cas_word(s.state, e, SlotWord::allocated(claimed_word, entry_index, tenancy))) {
        return false;
    }
    shm::bump_counter(b.header().claims);
    return true;
}

bool roll_back(shm::BlockFile& b, uint64_t i, uint64_t expected) {
    const bool released_before = shm::load_word(b.slot(i).changed_boot_ns) != 0;
    const SlotState to = released_before ? SlotState::kCooling : SlotState::kFree;
    uint64_t e = expected;
    if (!shm::cas_word(b.slot(i).state, e, SlotWord::next(expected, to))) {
        return false;
    }
    shm::bump_counter(b.header().rollbacks);
    sync_hint(b, i);
    return true;
}

bool begin_release(shm::BlockFile& b, uint64_t i, uint64_t expected, uint16_t lease_index,
                   uint16_t lease_gen, uint64_t* releasing_word) {
    const uint64_t desired =
        SlotWord::next(expected, SlotState::kReleasing, lease_index, lease_gen);
    uint64_t e = expected;
    if (!shm::cas_word(b.slot(i).state, e, desired)) return false;
    *releasing_word = desired;
    return true;
}

bool finish_release(shm::BlockFile& b, uint64_t i, uint64_t releasing_word, uint64_t now_boot_ns) {
    format::Slot& s = b.slot(i);
    // The cool-down start must be visible to anyone who sees COOLING: store it first (and only
    // while the slot is still the RELEASING word a racing healer may have finished already).
    if (shm::load_word(s.state) != releasing_word) return false;
    shm::store_word(s.changed_boot_ns, now_boot_ns, std::memory_order_relaxed);
    uint64_t e = releasing_word;
    if (!shm::cas_word(s.state, e, SlotWord::next(releasing_word, SlotState::kCooling))) {
        return false;
    }
    shm::bump_counter(b.header().releases);
    sync_hint(b, i);
    return true;
}

}  // namespace shmipam::engine::slot_ops
