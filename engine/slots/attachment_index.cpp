#include "engine/slots/attachment_index.h"

#include <sched.h>

#include "base/clock.h"
#include "base/fault_point.h"
#include "shm/atomic_word.h"

namespace shmipam::engine {

using format::EntryState;
using shm::EntryWord;

namespace {

// Yields before a reader waiting for an unstamped fingerprint starts judging the entry's driver
// (a liveness check per spin): a driver between its entry CAS and its stamps is almost always
// only descheduled, and a yield costs less than a judgement.
constexpr int kYieldsBeforeJudging = 64;
// Attempts of an ADD's entry claim: one is repeated only after healing a dead driver's entry of
// the same attachment, so the bound only stops a livelock; a live node never comes near it.
constexpr int kEntryClaimAttempts = 1000;

}  // namespace

uint64_t AttachmentIndex::stamped_fp1(uint64_t word, const Fingerprint& fp) {
    return shm::stamp::pack(EntryWord::decode(word).gen, fp.fp1);
}

std::optional<Fingerprint> AttachmentIndex::read_fp(const format::Entry& e, uint64_t word) {
    // fp1 is stored stamped with the entry generation of the word it belongs to, after fp2; a
    // stamp that matches the word proves both are this tenant's, not a previous one's.
    const uint64_t f1 = shm::load_word(e.fp1);
    const EntryWord w = EntryWord::decode(word);
    if (shm::stamp::gen_of(f1) != w.gen) return std::nullopt;
    const uint64_t f2 = shm::load_word(e.fp2);
    return Fingerprint{(uint64_t(w.fp16) << 48) | shm::stamp::value_of(f1), f2};
}

AttachmentIndex::Settled AttachmentIndex::settled_fp(uint64_t i, uint64_t word) {
    format::Entry& e = index_.entry(i);
    uint64_t deadline = 0;  // read the clock only once there is something to wait for
    for (int spin = 0;; ++spin) {
        auto fp = read_fp(e, word);
        if (shm::load_word(e.state) != word) return {};
        if (fp) return {fp, false};
        // Between the owner's CAS and its store of the fingerprint: wait, unless it died there.
        // Bounded by time (a count of yields is a few milliseconds on a busy node): past it the
        // owner is alive but stopped, and the entry stays unknown.
        if (spin == 1) deadline = base::boot_ns() + kStampWaitNs;
        if (spin > kYieldsBeforeJudging) {
            if (reap_ && reap_(i, word)) return {};
            if (base::boot_ns() >= deadline) return {std::nullopt, true};
        }
        sched_yield();
    }
}

bool AttachmentIndex::same_attachment(uint64_t i, uint64_t word, const Fingerprint& fp,
                                      bool* unsettled) {
    const EntryWord w = EntryWord::decode(word);
    if (!w.live() || w.fp16 != fp.fp16()) return false;
    const Settled s = settled_fp(i, word);
    if (s.unsettled && unsettled != nullptr) *unsettled = true;
    return s.fp && *s.fp == fp;
}

std::vector<EntryRef> AttachmentIndex::find(const Fingerprint& fp, bool* unsettled) {
    std::vector<EntryRef> out;
    const uint64_t mask = index_.entry_count() - 1;
    const uint64_t maxp = shm::load_word(index_.header().max_probe, std::memory_order_seq_cst);
    const uint64_t b = bucket(fp);
    for (uint64_t d = 0; d <= maxp && d <= mask; ++d) {
        const uint64_t i = (b + d) & mask;
        const uint64_t w = shm::load_word(index_.entry(i).state, std::memory_order_seq_cst);
        if (same_attachment(i, w, fp, unsettled)) out.push_back({i, w});
    }
    return out;
}

EntryClaim AttachmentIndex::claim(const Fingerprint& fp, const shm::LeaseHandle& lease) {
    const uint64_t mask = index_.entry_count() - 1;
    const uint64_t b = bucket(fp);
    for (int attempt = 0; attempt < kEntryClaimAttempts; ++attempt) {
        // 1. Is this attachment already here?
        bool retry = false;
        for (const EntryRef& e : find(fp)) {
            const EntryWord w = EntryWord::decode(e.word);
            if (w.state == EntryState::kCommitted) return {ClaimKind::kExisting, e};
            if (reap_ && reap_(e.index, e.word)) {
                retry = true;
                break;
            }
            return {ClaimKind::kBusy, e};
        }
        if (retry) continue;

        // 2. Claim the first reusable entry in the probe sequence.
        std::optional<EntryRef> mine;
        for (uint64_t d = 0; d <= mask && !mine; ++d) {
            const uint64_t i = (b + d) & mask;
            format::Entry& ent = index_.entry(i);
            uint64_t w = shm::load_word(ent.state, std::memory_order_seq_cst);
            const EntryState st = EntryWord::decode(w).state;
            if (st != EntryState::kEmpty && st != EntryState::kTombstone) continue;
            // Lookups must reach this entry before anyone can see it claimed.
            shm::fetch_max_word(index_.header().max_probe, d);
            const uint64_t desired = EntryWord::next(w, EntryState::kClaiming, fp.fp16(),
                                                     uint16_t(lease.index), lease.gen16());
            index_.leases().set_target(lease, i, EntryWord::decode(desired).gen);
            if (!shm::cas_word(ent.state, w, desired)) continue;
            SHMIPAM_FAULT("add.after_entry_claim");
            shm::store_word(ent.fp2, fp.fp2, std::memory_order_seq_cst);
            shm::store_word(ent.fp1, stamped_fp1(desired, fp), std::memory_order_seq_cst);
            SHMIPAM_FAULT("add.after_fingerprint");
            mine = EntryRef{i, desired};
        }
        if (!mine) return {ClaimKind::kFull, {}};

        // 3. Another invocation may have inserted the same attachment at the same time (each
        // saw the table without the other's entry). Both look again after their own CAS; with
        // sequentially consistent operations at least one sees the other, and whoever sees
        // another backs off, so at most one goes on.
        for (const EntryRef& other : find(fp)) {
            if (other.index == mine->index) continue;
            const EntryWord w = EntryWord::decode(other.word);
            if (w.state == EntryState::kClaiming && reap_ && reap_(other.index, other.word))
                continue;
            retire(mine->index, mine->word);
            if (w.state == EntryState::kCommitted) return {ClaimKind::kExisting, other};
            return {ClaimKind::kBusy, other};
        }
        return {ClaimKind::kClaimed, *mine};
    }
    return {ClaimKind::kBusy, {}};
}

bool AttachmentIndex::commit(const EntryRef& e, const Fingerprint& fp) {
    return transition(e.index, e.word, EntryWord::next(e.word, EntryState::kCommitted, fp.fp16()));
}

bool AttachmentIndex::transition(uint64_t index, uint64_t expected, uint64_t desired) {
    uint64_t w = expected;
    return shm::cas_word(index_.entry(index).state, w, desired);
}

bool AttachmentIndex::begin_release(const EntryRef& e, const shm::LeaseHandle& lease,
                                    uint64_t* releasing_word) {
    const EntryWord cur = EntryWord::decode(e.word);
    const uint64_t desired = EntryWord::next(e.word, EntryState::kReleasing, cur.fp16,
                                             uint16_t(lease.index), lease.gen16());
    if (!transition(e.index, e.word, desired)) return false;
    *releasing_word = desired;
    return true;
}

bool AttachmentIndex::retire(uint64_t index, uint64_t expected) {
    const EntryWord cur = EntryWord::decode(expected);
    return transition(index, expected, EntryWord::next(expected, EntryState::kTombstone, cur.fp16));
}

}  // namespace shmipam::engine
