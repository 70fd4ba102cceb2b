#include "shm/lease_table.h"

#include <fcntl.h>
#include <sched.h>

#include <cerrno>

#include "base/clock.h"
#include "base/fault_point.h"
#include "shm/atomic_word.h"
#include "shm/codec.h"

namespace shmipam::shm {

uint16_t LeaseHandle::gen16() const {
    return LeaseTable::gen_of(word);
}

LeaseTable::LeaseTable(std::span<uint64_t> words, std::span<format::LeaseSide> sides, int lock_fd,
                       uint64_t words_offset)
    : words_(words),
      sides_(sides),
      lock_fd_(lock_fd),
      words_offset_(words_offset),
      mine_(std::make_shared<std::vector<std::atomic<uint64_t>>>(words.size())) {}

namespace {

struct flock byte_lock(short type, uint64_t offset) {
    struct flock fl {};
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = off_t(offset);
    fl.l_len = 1;
    return fl;
}

}  // namespace

bool LeaseTable::lock_byte(uint32_t index) const {
    if (lock_fd_ < 0) return true;
    struct flock fl = byte_lock(F_WRLCK, words_offset_ + uint64_t(index) * sizeof(uint64_t));
    return ::fcntl(lock_fd_, F_OFD_SETLK, &fl) == 0;
}

void LeaseTable::unlock_byte(uint32_t index) const {
    if (lock_fd_ < 0) return;
    struct flock fl = byte_lock(F_UNLCK, words_offset_ + uint64_t(index) * sizeof(uint64_t));
    (void)::fcntl(lock_fd_, F_OFD_SETLK, &fl);
}

bool LeaseTable::byte_locked_elsewhere(uint32_t index) const {
    if (lock_fd_ < 0) return true;  // no lock to ask: never guess death
    struct flock fl = byte_lock(F_WRLCK, words_offset_ + uint64_t(index) * sizeof(uint64_t));
    if (::fcntl(lock_fd_, F_OFD_GETLK, &fl) != 0) return true;  // cannot tell: alive
    return fl.l_type != F_UNLCK;
}

Expected<LeaseHandle> LeaseTable::acquire(const ProcessIdentity& self) {
    const size_t n = words_.size();
    // Start at a pid-dependent place so concurrent invocations rarely race for the same lease.
    const size_t start = size_t(self.pid) * 7919u % n;
    // Passes over the table for at most kAcquireSpinNs of CLOCK_BOOTTIME (a count of passes
    // would mean microseconds on an idle core and seconds on a loaded one).
    const uint64_t deadline = base::boot_ns() + kAcquireSpinNs;
    for (int round = 0; round == 0 || base::boot_ns() < deadline; ++round) {
        for (size_t k = 0; k < n; ++k) {
            const size_t i = (start + k) % n;
            format::LeaseSide& l = sides_[i];
            uint64_t w = load_word(words_[i]);
            if (pid_of(w) != 0) continue;
            // The byte first: held by someone else means a holder between its freeing CAS and
            // its unlock, or one about to CAS: either way, not ours to take.
            if (!lock_byte(uint32_t(i))) continue;
            const uint64_t mine =
                make_word(self.pid, uint16_t(gen_of(w) + 1), self.pidns_tag, self.start_ticks);
            if (mine_) (*mine_)[i].store(mine, std::memory_order_relaxed);
            if (!cas_word(words_[i], w, mine)) {
                if (mine_) (*mine_)[i].store(0, std::memory_order_relaxed);
                unlock_byte(uint32_t(i));
                continue;
            }
            SHMIPAM_FAULT("lease.after_cas");
            // The side fields are stamped with the lease generation: until these stores land, a
            // reader sees the previous holder's stamp and treats them as unknown.
            const uint16_t gen = gen_of(mine);
            // acquired before tag: a reader that sees the tag also sees the time.
            store_word(l.target, 0);
            store_word(l.journal_intent, 0);
            store_word(l.acquired_boot_ms, stamp::pack(gen, base::boot_ns() / 1'000'000));
            store_word(l.tag, stamp::pack(gen, self.pidns_tag));
            return LeaseHandle{uint32_t(i), mine};
        }
        // Every lease is held: hundreds of live invocations, or dead ones nobody reaped yet. The
        // caller's recovery reaps dead ones between attempts; here we only back off.
        sched_yield();
    }
    return make_error(Code::kTryAgainLater, "every lease of the network is held",
                      "more concurrent invocations than the lease table holds");
}

void LeaseTable::release(const LeaseHandle& h) {
    uint64_t w = h.word;
    const uint64_t freed = LeaseWord::free(gen_of(h.word));
    cas_word(words_[h.index], w, freed);
    if (mine_) (*mine_)[h.index].store(0, std::memory_order_relaxed);
    unlock_byte(h.index);  // after the freeing CAS: a judge never sees our word unlocked
}

bool LeaseTable::free_if_unchanged(uint32_t index, uint64_t word) {
    uint64_t w = word;
    return cas_word(words_[index], w, LeaseWord::free(gen_of(word)));
}

void LeaseTable::set_target(const LeaseHandle& h, uint64_t entry_index, uint16_t entry_gen) {
    store_word(sides_[h.index].target, LeaseTarget::pack(entry_index, entry_gen),
               std::memory_order_seq_cst);
}

uint64_t LeaseTable::make_intent(uint16_t lease_gen, uint64_t tail) {
    return stamp::pack(lease_gen, tail + 1);
}

std::optional<uint64_t> LeaseTable::intent_of(uint32_t index, uint64_t word) const {
    const uint64_t v = stamp::value_if_stamped_by(
        gen_of(word), load_word(sides_[index].journal_intent, std::memory_order_seq_cst));
    if (v == 0) return std::nullopt;
    return v - 1;
}

uint64_t LeaseTable::target(uint32_t index) const {
    return load_word(sides_[index].target);
}

Holder LeaseTable::judge(uint32_t index, uint64_t w, const ProcessIdentity&) const {
    if (pid_of(w) == 0) return Holder::kFree;
    // Ours (the common case in every scan): no syscall.
    if (mine_ && (*mine_)[index].load(std::memory_order_relaxed) == w) return Holder::kAlive;
    // Its holder locked the byte before its CAS and unlocks it only after freeing: unlocked
    // with the word still held means the kernel dropped the lock, at the holder's death. (A
    // judge that read the word just before a live holder freed it and unlocked sees "dead" for
    // a word that is already free: whatever it does next is a CAS from that word, which fails.)
    return byte_locked_elsewhere(index) ? Holder::kAlive : Holder::kDead;
}

}  // namespace shmipam::shm
