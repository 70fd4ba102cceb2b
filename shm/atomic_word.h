// Cross-process atomic access to 8-byte words inside a shared mapping.
//
// Only std::atomic_ref on naturally aligned uint64_t: it is lock-free (checked in format.h), so it
// compiles to plain locked instructions that work between processes. No 16-byte atomics (libatomic
// may fall back to a process-local lock) and no wait/notify (process-local in libstdc++).
#pragma once

#include <atomic>
#include <cstdint>

namespace shmipam::shm {

inline uint64_t load_word(const uint64_t& w, std::memory_order o = std::memory_order_acquire) {
    return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(w)).load(o);
}

inline void store_word(uint64_t& w, uint64_t v, std::memory_order o = std::memory_order_release) {
    std::atomic_ref<uint64_t>(w).store(v, o);
}

// Strong CAS, sequentially consistent: the claim protocol relies on a total order between a
// claimer's CAS and its later re-reads (see docs/claim-protocol.md, "duplicate inserts").
inline bool cas_word(uint64_t& w, uint64_t& expected, uint64_t desired) {
    return std::atomic_ref<uint64_t>(w).compare_exchange_strong(expected, desired,
                                                                std::memory_order_seq_cst);
}

inline uint64_t fetch_or_word(uint64_t& w, uint64_t bits) {
    return std::atomic_ref<uint64_t>(w).fetch_or(bits, std::memory_order_acq_rel);
}

inline uint64_t fetch_and_word(uint64_t& w, uint64_t bits) {
    return std::atomic_ref<uint64_t>(w).fetch_and(bits, std::memory_order_acq_rel);
}

inline void bump_counter(uint64_t& w, uint64_t n = 1) {
    std::atomic_ref<uint64_t>(w).fetch_add(n, std::memory_order_relaxed);
}

// Raises w to at least v.
inline void fetch_max_word(uint64_t& w, uint64_t v) {
    std::atomic_ref<uint64_t> ref(w);
    uint64_t cur = ref.load(std::memory_order_seq_cst);
    while (cur < v && !ref.compare_exchange_weak(cur, v, std::memory_order_seq_cst)) {
    }
}

}  // namespace shmipam::shm
