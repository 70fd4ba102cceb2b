// How dump-file spells raw field values (describe.h): hex, boot ids, fixed text, addresses, time.
#include <cstdio>
#include <cstring>
#include <ctime>

#include "engine/addr/ip_address.h"
#include "tools/state_file/describe.h"

namespace shmipam::tools::state_file {

std::string hex(uint64_t v, int digits) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%0*llx", digits, (unsigned long long)v);
    return buf;
}

std::string uuid(const uint8_t (&b)[16]) {
    std::string out;
    for (int i = 0; i < 16; ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
        out += hex(b[i], 2);
    }
    return out;
}

std::string text_of(const char* p, size_t cap) {
    return std::string(p, strnlen(p, cap));
}

std::string address_at(uint8_t family, const uint8_t (&base)[16], uint64_t offset) {
    if (family != 4 && family != 6) return "?";
    std::array<uint8_t, 16> be{};
    std::memcpy(be.data(), base, 16);
    auto a = engine::IpAddress::from_bytes(engine::Family(family), be);
    a.value += offset;
    return a.to_string();
}

std::string address_of(uint8_t family, const uint8_t (&be)[16]) {
    return address_at(family, be, 0);
}

std::string utc(uint64_t unix_ns) {
    if (unix_ns == 0) return "-";
    const time_t t = time_t(unix_ns / 1'000'000'000u);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

}  // namespace shmipam::tools::state_file
