#include "engine/addr/ip_address.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace shmipam::engine {

u128 IpAddress::max_value() const {
    return family == Family::kV4 ? u128{0xFFFFFFFFu} : ~u128{0};
}

std::optional<IpAddress> IpAddress::parse(std::string_view text) {
    if (text.empty() || text.size() > 64) return std::nullopt;
    char buf[65];
    std::memcpy(buf, text.data(), text.size());
    buf[text.size()] = '\0';
    in_addr v4{};
    if (::inet_pton(AF_INET, buf, &v4) == 1) {
        return IpAddress{u128{ntohl(v4.s_addr)}, Family::kV4};
    }
    in6_addr v6{};
    if (::inet_pton(AF_INET6, buf, &v6) == 1) {
        std::array<uint8_t, 16> b{};
        std::memcpy(b.data(), v6.s6_addr, 16);
        IpAddress a = from_bytes(Family::kV6, b);
        // ::ffff:a.b.c.d is IPv4, as in Go's net.IP.
        if ((a.value >> 32) == u128{0xFFFFu}) return IpAddress{a.value & 0xFFFFFFFFu, Family::kV4};
        return a;
    }
    return std::nullopt;
}

IpAddress IpAddress::from_bytes(Family f, const std::array<uint8_t, 16>& be) {
    u128 v = 0;
    for (uint8_t b : be) v = (v << 8) | b;
    if (f == Family::kV4) v &= 0xFFFFFFFFu;
    return IpAddress{v, f};
}

std::array<uint8_t, 16> IpAddress::to_bytes() const {
    std::array<uint8_t, 16> b{};
    u128 v = value;
    for (int i = 15; i >= 0; --i) {
        b[size_t(i)] = uint8_t(v & 0xFF);
        v >>= 8;
    }
    return b;
}

std::string IpAddress::to_string() const {
    char buf[INET6_ADDRSTRLEN];
    if (family == Family::kV4) {
        // Written by hand: glibc's inet_ntop formats IPv4 through sprintf, about 1,700
        // instructions a call, and every answer formats two or three addresses.
        char* p = buf;
        for (int shift = 24; shift >= 0; shift -= 8) {
            const unsigned octet = unsigned(value >> shift) & 0xff;
            if (octet >= 100) *p++ = char('0' + octet / 100);
            if (octet >= 10) *p++ = char('0' + octet / 10 % 10);
            *p++ = char('0' + octet % 10);
            if (shift != 0) *p++ = '.';
        }
        return std::string(buf, size_t(p - buf));
    }
    in6_addr a{};
    auto b = to_bytes();
    std::memcpy(a.s6_addr, b.data(), 16);
    ::inet_ntop(AF_INET6, &a, buf, sizeof buf);
    return buf;
}

std::optional<IpAddress> add(IpAddress a, u128 n) {
    const u128 room = a.max_value() - a.value;
    if (n > room) return std::nullopt;
    a.value += n;
    return a;
}

std::optional<Cidr> Cidr::parse(std::string_view text) {
    const size_t slash = text.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    auto addr = IpAddress::parse(text.substr(0, slash));
    if (!addr) return std::nullopt;
    std::string_view p = text.substr(slash + 1);
    int prefix = -1;
    auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), prefix);
    if (ec != std::errc{} || ptr != p.data() + p.size() || p.empty() || p.size() > 3) {
        return std::nullopt;
    }
    // An IPv4-mapped address written with an IPv6 prefix: keep IPv6 semantics out of it.
    if (addr->family == Family::kV4 && text.substr(0, slash).find(':') != std::string_view::npos) {
        if (prefix < 96) return std::nullopt;
        prefix -= 96;
    }
    if (prefix < 0 || prefix > addr->bits()) return std::nullopt;
    return Cidr{*addr, prefix};
}

u128 Cidr::host_mask() const {
    const int host_bits = address.bits() - prefix;
    if (host_bits >= 128) return ~u128{0};
    return (u128{1} << host_bits) - 1;
}

IpAddress Cidr::network() const {
    return IpAddress{address.value & ~host_mask() & address.max_value(), address.family};
}

IpAddress Cidr::last() const {
    return IpAddress{network().value | host_mask(), address.family};
}

bool Cidr::contains(const IpAddress& a) const {
    return a.family == address.family && (a.value & ~host_mask()) == network().value;
}

std::string Cidr::to_string() const {
    return address.to_string() + "/" + std::to_string(prefix);
}

std::string addresses_text(const std::vector<IpAddress>& addresses) {
    std::string out;
    for (const auto& a : addresses) out += (out.empty() ? "" : ", ") + a.to_string();
    return out;
}

}  // namespace shmipam::engine
