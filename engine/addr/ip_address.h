// IPv4 and IPv6 addresses as one 128-bit value plus a family, and CIDRs over them.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shmipam::engine {

using u128 = unsigned __int128;

enum class Family : uint8_t { kV4 = 4, kV6 = 6 };

inline int family_bits(Family f) {
    return f == Family::kV4 ? 32 : 128;
}

struct IpAddress {
    u128 value = 0;
    Family family = Family::kV4;

    // Dotted quad or any IPv6 text form; an IPv4-mapped IPv6 address becomes IPv4 (as Go's
    // net.IP.To4 does, so configs mean what they mean to host-local).
    static std::optional<IpAddress> parse(std::string_view text);
    static IpAddress from_bytes(Family f, const std::array<uint8_t, 16>& be);

    std::string to_string() const;
    std::array<uint8_t, 16> to_bytes() const;  // big-endian, IPv4 in the last 4 bytes
    int bits() const { return family_bits(family); }
    u128 max_value() const;

    auto operator<=>(const IpAddress&) const = default;
};

// value + n within the family, nullopt on overflow.
std::optional<IpAddress> add(IpAddress a, u128 n);

struct Cidr {
    IpAddress address;  // as written (host bits may be set; validation reports that)
    int prefix = 0;

    // "a.b.c.d/n" or "v6/n". nullopt for anything else.
    static std::optional<Cidr> parse(std::string_view text);

    IpAddress network() const;
    IpAddress last() const;  // all host bits set
    u128 host_mask() const;
    bool contains(const IpAddress& a) const;
    bool has_host_bits() const { return network().value != address.value; }
    std::string to_string() const;
};

// Addresses as people read them in a message: "10.1.0.5, fd00::5" ("" for none).
std::string addresses_text(const std::vector<IpAddress>& addresses);

}  // namespace shmipam::engine
