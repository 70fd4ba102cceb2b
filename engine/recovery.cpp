#include "engine/recovery.h"

#include "engine/attachment_index.h"
#include "engine/slot_ops.h"
#include "shm/atomic_word.h"
#include "shm/clock.h"

namespace shmipam::engine {

using format::EntryState;
using format::SlotState;
using shm::EntryWord;
using shm::SlotWord;

namespace {

IpAddress ref_address(const format::AddressRef& r) {
    std::array<uint8_t, 16> b{};
    std::copy(std::begin(r.address), std::end(r.address), b.begin());
    return IpAddress::from_bytes(Family(r.family), b);
}

template <typename Fn>
void for_each_ref_slot(NetworkStore& store, uint64_t entry_index, Fn&& fn) {
    const format::Entry& e = store.index().entry(entry_index);
    const size_t n = std::min<size_t>(e.ref_count, format::kMaxRangeSets);
    for (size_t r = 0; r < n; ++r) {
        const format::AddressRef& ref = e.refs[r];
        if (ref.family != 4 && ref.family != 6) continue;  // not claimed yet
        const IpAddress a = ref_address(ref);
        auto block = store.block_for(a, false);
        if (!block || *block == nullptr) continue;
        fn(**block, store.slot_of(a));
    }
}

}  // namespace

void roll_back_claim(NetworkStore& store, uint64_t entry_index, uint64_t entry_word) {
    const EntryWord ew = EntryWord::decode(entry_word);
    for_each_ref_slot(store, entry_index, [&](shm::BlockFile& b, uint64_t i) {
        const uint64_t w = slot_ops::load_state(b, i);
        const SlotWord sw = SlotWord::decode(w);
        const bool claiming_by_lease =
            sw.state == SlotState::kClaiming && sw.held_by(ew.lease_index, ew.lease_gen);
        const bool published_to_entry =
            sw.state == SlotState::kAllocated &&
            slot_ops::owner_entry_plus_one(shm::load_word(b.slot(i).owner)) == entry_index + 1;
        if (claiming_by_lease || published_to_entry) slot_ops::roll_back(b, i, w);
    });
    AttachmentIndex(store.index(), nullptr).retire(entry_index, entry_word);
}

void complete_release(NetworkStore& store, uint64_t entry_index, uint64_t entry_word) {
    const EntryWord ew = EntryWord::decode(entry_word);
    const uint64_t now = shm::boot_ns();
    for_each_ref_slot(store, entry_index, [&](shm::BlockFile& b, uint64_t i) {
        uint64_t w = slot_ops::load_state(b, i);
        SlotWord sw = SlotWord::decode(w);
        const bool owned =
            slot_ops::owner_entry_plus_one(shm::load_word(b.slot(i).owner)) == entry_index + 1;
        if (sw.state == SlotState::kAllocated && owned) {
            if (!slot_ops::begin_release(b, i, w, ew.lease_index, ew.lease_gen, &w)) return;
            sw = SlotWord::decode(w);
        }
        if (sw.state == SlotState::kReleasing && sw.held_by(ew.lease_index, ew.lease_gen)) {
            slot_ops::finish_release(b, i, w, now);
        }
    });
    AttachmentIndex(store.index(), nullptr).retire(entry_index, entry_word);
}

bool reap_if_dead(NetworkStore& store, uint32_t lease_index, uint64_t lease_word) {
    shm::LeaseTable& leases = store.index().leases();
    if (leases.judge(lease_index, lease_word, store.self()) != shm::Holder::kDead) return false;
    const uint16_t gen = shm::LeaseTable::gen_of(lease_word);
    const uint64_t target = leases.target(lease_index);
    if (target != 0 && target <= store.index().entry_count()) {
        const uint64_t e = target - 1;
        const uint64_t w = shm::load_word(store.index().entry(e).state);
        const EntryWord ew = EntryWord::decode(w);
        if (ew.held_by(uint16_t(lease_index), gen)) {
            if (ew.state == EntryState::kClaiming) roll_back_claim(store, e, w);
            if (ew.state == EntryState::kReleasing) complete_release(store, e, w);
        }
    }
    if (leases.free_if_unchanged(lease_index, lease_word)) {
        shm::bump_counter(store.index().header().dead_leases_reaped);
    }
    return true;
}

bool reap_named_if_dead(NetworkStore& store, uint16_t lease_index, uint16_t lease_gen) {
    shm::LeaseTable& leases = store.index().leases();
    if (lease_index >= leases.size()) return false;
    const uint64_t w = leases.word(lease_index);
    // The lease was freed (its work done) or has a new holder: what named it is settled.
    if (shm::LeaseTable::pid_of(w) == 0 || shm::LeaseTable::gen_of(w) != lease_gen) return true;
    return reap_if_dead(store, lease_index, w);
}

size_t reap_dead_leases(NetworkStore& store) {
    shm::LeaseTable& leases = store.index().leases();
    size_t n = 0;
    for (uint32_t i = 0; i < leases.size(); ++i) {
        const uint64_t w = leases.word(i);
        if (shm::LeaseTable::pid_of(w) == 0) continue;
        if (reap_if_dead(store, i, w)) ++n;
    }
    return n;
}

}  // namespace shmipam::engine
