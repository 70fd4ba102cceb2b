#include "engine/addr/ip_address.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

namespace shmipam::engine {
namespace {

TEST(IpAddress, ParsesAndFormatsIpv4) {
    auto a = IpAddress::parse("10.1.2.3");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->family, Family::kV4);
    EXPECT_EQ(uint32_t(a->value), 0x0A010203u);
    EXPECT_EQ(a->to_string(), "10.1.2.3");
    EXPECT_EQ(IpAddress::parse("0.0.0.0")->to_string(), "0.0.0.0");
    EXPECT_EQ(IpAddress::parse("255.255.255.255")->value, u128{0xFFFFFFFFu});
}

// IPv4 is formatted by hand (not inet_ntop): every octet width, at every position.
TEST(IpAddress, FormatsEveryIpv4OctetAsInetNtopDoes) {
    for (uint32_t octet : {0u, 1u, 9u, 10u, 99u, 100u, 109u, 110u, 199u, 200u, 250u, 255u}) {
        for (int shift : {0, 8, 16, 24}) {
            const uint32_t v = (octet << shift) | (shift == 0 ? 0x0a000000u : 7u);
            in_addr a{};
            a.s_addr = htonl(v);
            char want[INET_ADDRSTRLEN];
            ASSERT_NE(::inet_ntop(AF_INET, &a, want, sizeof want), nullptr);
            EXPECT_EQ((IpAddress{v, Family::kV4}.to_string()), want) << v;
        }
    }
    EXPECT_EQ((IpAddress{0xffffffffu, Family::kV4}.to_string()), "255.255.255.255");
}

TEST(IpAddress, ParsesAndFormatsIpv6Edges) {
    auto zero = IpAddress::parse("::");
    ASSERT_TRUE(zero);
    EXPECT_EQ(zero->family, Family::kV6);
    EXPECT_EQ(zero->value, u128{0});
    EXPECT_EQ(zero->to_string(), "::");
    auto top = IpAddress::parse("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
    ASSERT_TRUE(top);
    EXPECT_EQ(top->value, ~u128{0});
    EXPECT_EQ(top->to_string(), "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
    EXPECT_EQ(IpAddress::parse("2001:DB8::1")->to_string(), "2001:db8::1");
}

TEST(IpAddress, Ipv4MappedBecomesIpv4AsInGo) {
    auto a = IpAddress::parse("::ffff:10.0.0.1");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->family, Family::kV4);
    EXPECT_EQ(a->to_string(), "10.0.0.1");
}

TEST(IpAddress, RejectsGarbage) {
    for (const char* s : {"", "10.0.0", "10.0.0.256", "1.2.3.4.5", "abc", "10.0.0.1/24", "::g",
                          " 10.0.0.1", "1:2:3:4:5:6:7:8:9"}) {
        EXPECT_FALSE(IpAddress::parse(s)) << s;
    }
}

TEST(IpAddress, BytesRoundTrip) {
    for (const char* s :
         {"10.20.30.40", "fd00::1:2", "::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}) {
        auto a = *IpAddress::parse(s);
        EXPECT_EQ(IpAddress::from_bytes(a.family, a.to_bytes()), a) << s;
    }
}

TEST(IpAddress, AddStopsAtTheEndOfTheFamily) {
    auto a = *IpAddress::parse("255.255.255.254");
    EXPECT_EQ(add(a, 1)->to_string(), "255.255.255.255");
    EXPECT_FALSE(add(a, 2));
    auto b = *IpAddress::parse("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe");
    EXPECT_TRUE(add(b, 1));
    EXPECT_FALSE(add(b, 2));
}

TEST(Cidr, NetworkLastContains) {
    auto c = *Cidr::parse("10.1.2.3/24");
    EXPECT_TRUE(c.has_host_bits());
    EXPECT_EQ(c.network().to_string(), "10.1.2.0");
    EXPECT_EQ(c.last().to_string(), "10.1.2.255");
    EXPECT_TRUE(c.contains(*IpAddress::parse("10.1.2.255")));
    EXPECT_FALSE(c.contains(*IpAddress::parse("10.1.3.0")));
    EXPECT_FALSE(c.contains(*IpAddress::parse("::a01:200")));

    auto all = *Cidr::parse("::/0");
    EXPECT_EQ(all.last().value, ~u128{0});
    EXPECT_TRUE(all.contains(*IpAddress::parse("ffff::1")));
    auto v4all = *Cidr::parse("0.0.0.0/0");
    EXPECT_EQ(v4all.last().to_string(), "255.255.255.255");
    auto host = *Cidr::parse("fd00::5/128");
    EXPECT_EQ(host.network(), host.last());
}

TEST(Cidr, RejectsBadPrefixes) {
    for (const char* s : {"10.0.0.0", "10.0.0.0/33", "10.0.0.0/-1", "10.0.0.0/", "10.0.0.0/2a",
                          "fd00::/129", "x/24", "10.0.0.0/0024"}) {
        EXPECT_FALSE(Cidr::parse(s)) << s;
    }
}

}  // namespace
}  // namespace shmipam::engine
