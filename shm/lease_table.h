// The lease table: a small array of 32-byte leases in the network's index file. Every invocation
// that changes state takes one lease first (one CAS), and every slot or entry it is changing
// names that lease. A lease whose holder died is found by anyone scanning the table (as LMDB's
// reader table finds dead readers), and its half-done work is rolled back or forward by the
// engine's recovery before the lease is freed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "shm/codec.h"
#include "shm/format.h"
#include "shm/process_identity.h"

namespace shmipam::shm {

struct LeaseHandle {
    uint32_t index = 0;
    uint64_t word = 0;  // the word as acquired: pid | gen | start time
    uint16_t gen16() const;
};

enum class Holder { kFree, kAlive, kDead };

// Liveness is a lock the kernel drops when the holder dies, as LMDB's reader table does with
// byte locks, so a recycled pid never passes for a live holder and a live one (stopped, old, in
// another pid namespace) is never judged dead and reaped under it. A holder keeps an
// open-file-description lock (F_OFD_SETLK, never waiting) on its lease word's first byte of the
// index file from before its acquiring CAS until after its freeing CAS. The kernel drops it when
// the holder dies, in any pid namespace, and never while it lives (stopped, slow or swapped
// out); a judge asks F_OFD_GETLK. Pids, start times and namespaces only label.
class LeaseTable {
  public:
    LeaseTable(std::span<uint64_t> words, std::span<format::LeaseSide> sides)
        : words_(words), sides_(sides) {}
    // `lock_fd` is a descriptor of the index file (its own open file description) and
    // `words_offset` where the lease words start in it. Without one (an index built aside,
    // which nobody else sees), nothing is locked and a held lease is judged alive.
    LeaseTable(std::span<uint64_t> words, std::span<format::LeaseSide> sides, int lock_fd,
               uint64_t words_offset);

    // How long one acquire passes over a full table before answering 11 (the caller reaps and
    // tries again within its own bound).
    static constexpr uint64_t kAcquireSpinNs = 20'000'000;
    // The lease's byte lock, then one CAS on a free lease; Code::kTryAgainLater when every lease
    // is held by a live process.
    Expected<LeaseHandle> acquire(const ProcessIdentity& self);
    void release(const LeaseHandle& h);

    // Whether the lease's holder (as of word) is alive: ours (acquired through this table and
    // not freed), or its byte locked by another open file description. `self` is unused (kept
    // for the callers' symmetry with acquire).
    Holder judge(uint32_t index, uint64_t word, const ProcessIdentity& self) const;

    // Frees a dead holder's lease after its work was recovered; false if it changed meanwhile.
    bool free_if_unchanged(uint32_t index, uint64_t word);

    // The entry the holder is about to work on (index, tenancy generation); see format.h.
    void set_target(const LeaseHandle& h, uint64_t entry_index, uint16_t entry_gen);
    uint64_t target(uint32_t index) const;

    // Journal intents (format.h): the word an appending holder stamps with its lease generation
    // and the tail it read just before reserving, and clears when its records are written.
    static uint64_t make_intent(uint16_t lease_gen, uint64_t tail);
    uint64_t& intent_word(uint32_t index) { return sides_[index].journal_intent; }
    format::LeaseSide& side(uint32_t index) { return sides_[index]; }
    const uint64_t& word_ref(uint32_t index) const { return words_[index]; }
    // The tail held by the intent of lease `index` if its stamp is the holder's of `word`: a
    // stamp of an earlier holder is stale (that holder finished, or died and was reaped).
    std::optional<uint64_t> intent_of(uint32_t index, uint64_t word) const;

    uint64_t word(uint32_t index) const {
        return std::atomic_ref<uint64_t>(words_[index]).load(std::memory_order_acquire);
    }
    size_t size() const { return words_.size(); }

    static pid_t pid_of(uint64_t word) { return LeaseWord::pid_of(word); }
    static uint16_t gen_of(uint64_t word) { return LeaseWord::gen_of(word); }
    // Indexes of held leases, found with a relaxed pass over the packed words (the scan every
    // ADD and DEL makes); callers re-load each one before acting on it.
    template <typename Fn>
    void for_each_held(Fn&& fn) const {
        for (uint32_t i = 0; i < words_.size(); ++i) {
            const uint64_t w = std::atomic_ref<uint64_t>(words_[i]).load(std::memory_order_relaxed);
            if (pid_of(w) != 0) fn(i);
        }
    }
    static uint64_t make_word(pid_t pid, uint16_t gen, uint64_t pidns_tag, uint64_t start_ticks) {
        return LeaseWord::make(pid, gen, pidns_tag, start_ticks);
    }

  private:
    bool lock_byte(uint32_t index) const;
    void unlock_byte(uint32_t index) const;
    bool byte_locked_elsewhere(uint32_t index) const;

    std::span<uint64_t> words_;
    std::span<format::LeaseSide> sides_;
    int lock_fd_ = -1;
    uint64_t words_offset_ = 0;
    // The word of each lease this table (its open file description) holds, 0 for none: our own
    // locks never conflict with our own F_OFD_GETLK, so ours are told by this.
    std::shared_ptr<std::vector<std::atomic<uint64_t>>> mine_;
};

}  // namespace shmipam::shm
