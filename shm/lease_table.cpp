#include "shm/lease_table.h"

#include <sched.h>
#include <signal.h>

#include <cerrno>

#include "base/clock.h"
#include "base/fault_point.h"
#include "shm/atomic_word.h"
#include "shm/codec.h"

namespace shmipam::shm {

uint16_t LeaseHandle::gen16() const {
    return LeaseTable::gen_of(word);
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
            const uint64_t mine =
                make_word(self.pid, uint16_t(gen_of(w) + 1), self.pidns_tag, self.start_ticks);
            if (cas_word(words_[i], w, mine)) {
                SHMIPAM_FAULT("lease.after_cas");
                // The side fields are stamped with the lease generation: until these stores
                // land, a reader sees the previous holder's stamp and treats them as unknown.
                const uint16_t gen = gen_of(mine);
                // acquired before tag: a reader that sees the tag also sees the time.
                store_word(l.target, 0);
                store_word(l.journal_intent, 0);
                store_word(l.acquired_boot_ms, stamp::pack(gen, base::boot_ns() / 1'000'000));
                store_word(l.tag, stamp::pack(gen, self.pidns_tag));
                return LeaseHandle{uint32_t(i), mine};
            }
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

Holder LeaseTable::judge(uint32_t index, uint64_t w, const ProcessIdentity& self) const {
    const pid_t pid = pid_of(w);
    if (pid == 0) return Holder::kFree;
    // Our own lease (the common case in every scan): no clock, no syscall.
    if (pid == self.pid && LeaseWord::start_of(w) == (self.start_ticks & LeaseWord::kStartMask) &&
        LeaseWord::ns_of(w) == LeaseWord::ns_hash(self.pidns_tag)) {
        return Holder::kAlive;
    }
    const format::LeaseSide& l = sides_[index];
    const uint16_t gen = gen_of(w);
    const uint64_t acquired = stamp::value_if_stamped_by(gen, load_word(l.acquired_boot_ms));
    const uint64_t tag = stamp::value_if_stamped_by(gen, load_word(l.tag));
    const uint64_t now = base::boot_ns() / 1'000'000;
    const uint64_t age = (acquired != 0 && now > acquired) ? now - acquired : 0;
    // Another pid namespace: its pids mean nothing here, only time can tell. The full tag is
    // known once stamped; before that, the 4-bit hash in the word says it.
    const uint64_t my_tag = stamp::value_of(self.pidns_tag);
    const bool foreign =
        tag != 0 ? tag != my_tag : LeaseWord::ns_of(w) != LeaseWord::ns_hash(self.pidns_tag);
    if (foreign)
        return acquired != 0 && age > kForeignLeaseTimeoutMs ? Holder::kDead : Holder::kAlive;
    if (::kill(pid, 0) != 0 && errno == ESRCH) return Holder::kDead;
    // EPERM or success: a process with that pid exists. It may be the holder, a zombie holder,
    // or another process that reused the pid. /proc tells, but costs a file read: only ask for
    // leases held longer than an invocation takes, or whose acquisition time was never written.
    if (acquired != 0 && age < kProcCheckAfterMs) return Holder::kAlive;
    const ProcStat st = read_proc_stat(pid);
    if (st.lookup == ProcStat::Lookup::kGone) return Holder::kDead;
    if (st.lookup == ProcStat::Lookup::kUnknown) return Holder::kAlive;  // never guess death
    if (st.state == 'Z' || st.state == 'X') return Holder::kDead;
    // A holder that could not read its own start time recorded 0: then only death shows.
    if (LeaseWord::start_of(w) != 0 &&
        (st.start_ticks & LeaseWord::kStartMask) != LeaseWord::start_of(w))
        return Holder::kDead;
    return Holder::kAlive;
}

}  // namespace shmipam::shm
