// The identity of an attachment (containerID, ifname) as a 128-bit fingerprint. The index keys
// entries by it; the strings are kept only for display. Two 64-bit hashes with different seeds:
// a collision needs both to collide (about 2^-128 per pair of attachments).
#pragma once

#include <cstdint>
#include <string_view>

namespace shmipam::engine {

struct Fingerprint {
    uint64_t fp1 = 0;  // never 0 (0 means "not written yet" in an entry)
    uint64_t fp2 = 0;
    uint16_t fp16() const { return uint16_t(fp1 >> 48); }
    bool operator==(const Fingerprint&) const = default;
};

Fingerprint fingerprint(std::string_view container_id, std::string_view ifname);

}  // namespace shmipam::engine
