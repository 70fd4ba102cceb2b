// Small conversions between the fixed-size fields of entries, slots and journal records
// (format.h) and engine values.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>

#include "engine/addr/ip_address.h"
#include "shm/atomic_word.h"
#include "shm/codec.h"
#include "shm/format.h"

namespace shmipam::engine {

// Held for a name, not for a sandbox (format.h, kEntryFlagClaim), by an entry's or a record's
// flags: its allocation outlives the boot and is no GC's to release.
inline bool held_for_a_name(uint32_t flags) {
    return (flags & format::kEntryFlagClaim) != 0;
}

// A sandbox using a claim's addresses (format.h, kEntryFlagBinding): it holds no slot itself.
inline bool uses_a_claim(uint32_t flags) {
    return (flags & format::kEntryFlagBinding) != 0;
}

// A claim freed "at DEL" whose DEL never came (its ADD died before binding, or the DEL died
// between unbinding and releasing) is freed this long after it was seen idle: long enough that
// an ADD between committing a claim and binding it is never overtaken.
inline constexpr uint64_t kAtDeleteGraceS = 60;

// When a claim idle since idle_since_s (unix seconds) may be freed by its policy (format.h,
// ClaimFields::keep_idle); 0 never.
inline uint64_t claim_due_at(uint64_t keep_idle, uint64_t idle_since_s) {
    if (keep_idle == format::kKeepIdleForever || keep_idle == format::kKeepIdleWhileOwnerWants) {
        return 0;
    }
    if (keep_idle == format::kKeepIdleNone) return idle_since_s + kAtDeleteGraceS;
    return idle_since_s + (keep_idle - 1);
}

// Lowers the index header's claim_due word (format.h) to due_s (unix seconds); 0 does nothing.
inline void lower_claim_due(uint64_t& word, uint64_t due_s) {
    if (due_s == 0) return;
    std::atomic_ref<uint64_t> ref(word);
    uint64_t cur = ref.load(std::memory_order_seq_cst);
    while (!ref.compare_exchange_weak(cur, shm::ClaimDue::lowered(cur, due_s),
                                      std::memory_order_seq_cst)) {
    }
}

// An attachment's text, as its entry and its journal records hold it (truncated to the fields).
struct AttachmentText {
    std::string container_id;
    std::string ifname;
    std::string pod;
    uint8_t flags = 0;
    uint64_t created_unix_ns = 0;
    uint64_t claim_keep_idle = 0;  // kEntryFlagClaim: ClaimFields::keep_idle
};

// Copies s into a NUL-terminated field of cap bytes, truncating (display fields).
inline void copy_truncated(char* dst, size_t cap, const std::string& s) {
    std::memset(dst, 0, cap);
    std::memcpy(dst, s.data(), std::min(s.size(), cap - 1));
}

// The text of a NUL-terminated (or full) fixed field.
inline std::string fixed(const char* s, size_t cap) {
    return std::string(s, strnlen(s, cap));
}

// The pod an entry names (a claim entry keeps a shorter copy beside its claim words).
inline std::string pod_of(const format::Entry& e) {
    if (held_for_a_name(e.flags)) return fixed(e.claim.pod, sizeof e.claim.pod);
    return fixed(e.pod, sizeof e.pod);
}
// Writes the pod's name; the entry's flags must already be set. A claim entry's claim words are
// set with it (before its commit publishes them): `binding` and the others as given.
inline void set_pod(format::Entry& e, const std::string& pod, uint64_t keep_idle = 0,
                    uint64_t binding = 0, uint64_t records_of_earlier_boot = 0) {
    if (held_for_a_name(e.flags)) {
        shm::store_word(e.claim.binding, binding, std::memory_order_relaxed);
        e.claim.keep_idle = keep_idle;
        shm::store_word(e.claim.records_of_earlier_boot, records_of_earlier_boot,
                        std::memory_order_relaxed);
        copy_truncated(e.claim.pod, sizeof e.claim.pod, pod);
    } else {
        copy_truncated(e.pod, sizeof e.pod, pod);
    }
}

// The entry's network tag (pool mode), 48 bits little-endian.
inline void set_network_tag(format::Entry& e, uint64_t tag) {
    for (size_t i = 0; i < sizeof e.network_tag; ++i) e.network_tag[i] = uint8_t(tag >> (8 * i));
}
inline uint64_t network_tag_of(const format::Entry& e) {
    uint64_t tag = 0;
    for (size_t i = 0; i < sizeof e.network_tag; ++i) tag |= uint64_t(e.network_tag[i]) << (8 * i);
    return tag;
}

inline IpAddress ref_address(const format::AddressRef& r) {
    std::array<uint8_t, 16> b{};
    std::copy(std::begin(r.address), std::end(r.address), b.begin());
    return IpAddress::from_bytes(Family(r.family), b);
}

}  // namespace shmipam::engine
