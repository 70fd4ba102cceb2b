#include "engine/addr/range.h"

#include <gtest/gtest.h>

namespace shmipam::engine {
namespace {

Range make(const std::string& subnet, const std::string& start = "", const std::string& end = "",
           const std::string& gw = "") {
    auto r = Range::from_spec({subnet, start, end, gw});
    EXPECT_TRUE(r) << (r ? "" : r.error().msg);
    return r ? *r : Range{};
}

Error error_of(const std::string& subnet, const std::string& start = "",
               const std::string& end = "", const std::string& gw = "") {
    auto r = Range::from_spec({subnet, start, end, gw});
    EXPECT_FALSE(r) << subnet;
    return r ? Error{} : r.error();
}

TEST(Range, DefaultsLikeHostLocal) {
    Range r = make("10.1.2.0/24");
    EXPECT_EQ(r.start.to_string(), "10.1.2.1");
    EXPECT_EQ(r.end.to_string(), "10.1.2.254");  // broadcast excluded for IPv4
    EXPECT_EQ(r.gateway.to_string(), "10.1.2.1");
    Range v6 = make("fd00::/120");
    EXPECT_EQ(v6.start.to_string(), "fd00::1");
    EXPECT_EQ(v6.end.to_string(), "fd00::ff");  // IPv6 has no broadcast
    EXPECT_EQ(v6.gateway.to_string(), "fd00::1");
}

TEST(Range, ExplicitFieldsAreKept) {
    Range r = make("10.1.0.0/16", "10.1.1.20", "10.1.3.50", "10.1.0.254");
    EXPECT_EQ(r.start.to_string(), "10.1.1.20");
    EXPECT_EQ(r.end.to_string(), "10.1.3.50");
    EXPECT_EQ(r.gateway.to_string(), "10.1.0.254");
    EXPECT_EQ(r.size(), u128{2 * 256 + 31});
}

TEST(Range, TooSmallNetworks) {
    for (const char* s : {"10.0.0.0/31", "10.0.0.1/32", "fd00::/127", "fd00::/128"}) {
        Error e = error_of(s);
        EXPECT_EQ(e.code, Code::kInvalidConfig);
        EXPECT_NE(e.msg.find("too small"), std::string::npos) << e.msg;
    }
    EXPECT_TRUE(Range::from_spec({"10.0.0.0/30", "", "", ""}));
    EXPECT_TRUE(Range::from_spec({"fd00::/126", "", "", ""}));
}

TEST(Range, HostBitsAreRejected) {
    Error e = error_of("10.1.2.3/24");
    EXPECT_NE(e.msg.find("host bits set"), std::string::npos);
    EXPECT_NE(e.msg.find("10.1.2.0"), std::string::npos);
}

TEST(Range, StartEndOutsideOrReversed) {
    EXPECT_NE(error_of("10.1.2.0/24", "10.1.3.1").msg.find("RangeStart"), std::string::npos);
    EXPECT_NE(error_of("10.1.2.0/24", "", "10.1.3.1").msg.find("RangeEnd"), std::string::npos);
    EXPECT_NE(error_of("10.1.2.0/24", "10.1.2.9", "10.1.2.3").msg.find("after"), std::string::npos);
    EXPECT_EQ(error_of("10.1.2.0/24", "nonsense").code, Code::kInvalidConfig);
    EXPECT_EQ(error_of("bogus").code, Code::kInvalidConfig);
    EXPECT_EQ(error_of("10.1.2.0/24", "", "", "fd00::1").code, Code::kInvalidConfig);
}

TEST(Range, SingleAddressRange) {
    Range r = make("10.1.2.0/24", "10.1.2.7", "10.1.2.7");
    EXPECT_EQ(r.size(), u128{1});
    EXPECT_TRUE(r.contains(*IpAddress::parse("10.1.2.7")));
    EXPECT_FALSE(r.contains(*IpAddress::parse("10.1.2.8")));
    EXPECT_EQ(usable_count({r}), u128{1});
}

TEST(Range, ExclusionsAndUsableCount) {
    Range r = make("10.1.2.0/24");
    EXPECT_TRUE(r.excluded(*IpAddress::parse("10.1.2.0")));
    EXPECT_TRUE(r.excluded(*IpAddress::parse("10.1.2.1")));
    EXPECT_TRUE(r.excluded(*IpAddress::parse("10.1.2.255")));
    EXPECT_FALSE(r.excluded(*IpAddress::parse("10.1.2.2")));
    EXPECT_EQ(usable_count({r}), u128{253});  // .2 .. .254
    // A range that starts at the network address still never hands it out.
    Range wide = make("10.1.2.0/24", "10.1.2.0", "10.1.2.255");
    EXPECT_EQ(usable_count({wide}), u128{253});
    Range v6 = make("fd00::/120");
    EXPECT_EQ(usable_count({v6}), u128{254});  // ::1 (gateway) .. ::ff, less nothing else
}

TEST(RangeSet, MixedFamiliesAndOverlapsAreRejected) {
    auto mixed = make_range_set({{"10.0.0.0/24", "", "", ""}, {"fd00::/64", "", "", ""}});
    ASSERT_FALSE(mixed);
    EXPECT_NE(mixed.error().msg.find("mixed address families"), std::string::npos);
    auto overlap = make_range_set({{"10.0.0.0/24", "", "", ""}, {"10.0.0.0/25", "", "", ""}});
    ASSERT_FALSE(overlap);
    EXPECT_NE(overlap.error().msg.find("overlap"), std::string::npos);
    EXPECT_FALSE(make_range_set({}));

    auto a = *make_range_set({{"10.0.0.0/24", "", "", ""}});
    auto b = *make_range_set({{"10.0.0.0/16", "", "", ""}});
    auto c = *make_range_set({{"fd00::/64", "", "", ""}});
    EXPECT_FALSE(check_range_sets({a, b}));
    EXPECT_TRUE(check_range_sets({a, c}));
    EXPECT_FALSE(check_range_sets({}));
}

TEST(RangeSet, RangeIndexFor) {
    auto set = *make_range_set({{"10.0.0.0/24", "", "", ""}, {"10.0.5.0/24", "", "", ""}});
    EXPECT_EQ(range_index_for(set, *IpAddress::parse("10.0.5.9")), std::optional<size_t>(1));
    EXPECT_EQ(range_index_for(set, *IpAddress::parse("10.0.0.9")), std::optional<size_t>(0));
    EXPECT_FALSE(range_index_for(set, *IpAddress::parse("10.0.6.9")));
}

}  // namespace
}  // namespace shmipam::engine
