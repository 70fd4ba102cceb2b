// What every operation file of ops/ shares: the lease an operation holds while it changes
// anything, the attachment index with its healer, and the answer to a retired state.
#pragma once

#include <unistd.h>

#include "base/clock.h"
#include "base/status.h"
#include "engine/recovery/recovery.h"
#include "engine/slots/attachment_index.h"
#include "engine/state/network_store.h"

namespace shmipam::engine {

// Holds a lease for the duration of one operation.
class LeaseGuard {
  public:
    explicit LeaseGuard(NetworkStore& store) : store_(store) {}
    ~LeaseGuard() {
        if (!held_) return;
        // A freed lease must never name unfinished work.
        settle_own_work(store_, handle_);
        store_.set_active_lease(nullptr);
        store_.index().leases().release(handle_);
    }
    LeaseGuard(const LeaseGuard&) = delete;
    LeaseGuard& operator=(const LeaseGuard&) = delete;

    // At most kWaitNs of CLOCK_BOOTTIME for a lease of a full table (each try spins up to
    // LeaseTable::kAcquireSpinNs; dead holders are reaped between tries); then 11.
    static constexpr uint64_t kWaitNs = 500'000'000;
    // The pause between tries when no dead holder was reaped, so every lease is held by a live
    // invocation: about what one of them takes to finish (an ADD or DEL: milliseconds).
    static constexpr useconds_t kFullTablePauseUs = 10'000;
    Status acquire() {
        const uint64_t deadline = base::boot_ns() + kWaitNs;
        for (int attempt = 0; attempt == 0 || base::boot_ns() < deadline; ++attempt) {
            auto h = store_.index().leases().acquire(store_.self());
            if (h) {
                handle_ = *h;
                held_ = true;
                store_.set_active_lease(&handle_);  // journal appends carry its intent
                return Ok{};
            }
            // Full: dead holders may be hogging leases.
            if (reap_dead_leases(store_) == 0 && base::boot_ns() < deadline) {
                usleep(kFullTablePauseUs);
            }
        }
        return make_error(Code::kTryAgainLater, "every lease of the network is held");
    }
    const shm::LeaseHandle& handle() const { return handle_; }

  private:
    NetworkStore& store_;
    shm::LeaseHandle handle_;
    bool held_ = false;
};

inline AttachmentIndex make_index(NetworkStore& store) {
    return AttachmentIndex(store.index(), [&store](uint64_t entry_index, uint64_t entry_word) {
        return heal_entry_if_orphaned(store, entry_index, entry_word);
    });
}

inline Error retired_error() {
    return make_error(
        Code::kTryAgainLater,
        "the network's state was retired or replaced; the next invocation rebuilds it "
        "or maps the new one");
}

}  // namespace shmipam::engine
