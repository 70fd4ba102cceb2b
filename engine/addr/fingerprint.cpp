#include "engine/addr/fingerprint.h"

namespace shmipam::engine {
namespace {

// FNV-1a then a SplitMix64 finaliser (FNV alone mixes the high bits poorly, and fp16 and the
// bucket come from the high and low bits).
uint64_t hash(std::string_view a, std::string_view b, uint64_t seed) {
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    auto mix = [&](std::string_view s) {
        for (unsigned char c : s) {
            h ^= c;
            h *= 0x100000001b3ull;
        }
    };
    mix(a);
    h ^= 0xFF;  // separator that cannot occur in either string
    h *= 0x100000001b3ull;
    mix(b);
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h;
}

}  // namespace

Fingerprint fingerprint(std::string_view container_id, std::string_view ifname) {
    Fingerprint f{hash(container_id, ifname, 0), hash(container_id, ifname, 0x9e3779b97f4a7c15ull)};
    if (f.fp1 == 0) f.fp1 = 1;
    return f;
}

}  // namespace shmipam::engine
