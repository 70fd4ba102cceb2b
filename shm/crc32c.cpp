#include "shm/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#include <sys/platform/x86.h>
#endif

namespace shmipam::shm {
namespace {

constexpr std::array<uint32_t, 256> make_table() {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        t[i] = c;
    }
    return t;
}
constexpr auto kTable = make_table();

uint32_t crc32c_table(const uint8_t* p, size_t len, uint32_t c) {
    for (size_t i = 0; i < len; ++i) c = kTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__)
// The SSE4.2 instruction computes exactly this polynomial, 8 bytes at a time: every journal
// record is checksummed on the claim path, so it matters there.
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const uint8_t* p, size_t len, uint32_t c) {
    uint64_t c64 = c;
    while (len >= 8) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        c64 = _mm_crc32_u64(c64, v);
        p += 8;
        len -= 8;
    }
    c = uint32_t(c64);
    while (len > 0) {
        c = _mm_crc32_u8(c, *p++);
        --len;
    }
    return c;
}
// Asked of glibc, which detected the CPU's features at start-up anyway: __builtin_cpu_supports
// would link libgcc's detector, whose dozen CPUID instructions each trap to the hypervisor in a
// VM (about 7% of a one-shot invocation's CPU, measured with perf record -e cpu-clock).
const bool kHaveSse42 = CPU_FEATURE_ACTIVE(SSE4_2);
#endif

}  // namespace

uint32_t crc32c(const void* data, size_t len, uint32_t seed) {
    auto* p = static_cast<const uint8_t*>(data);
#if defined(__x86_64__)
    if (kHaveSse42) return ~crc32c_sse42(p, len, ~seed);
#endif
    return ~crc32c_table(p, len, ~seed);
}

}  // namespace shmipam::shm
