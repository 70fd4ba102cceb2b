// The plugin/helper protocol (cluster/helper_protocol.h): every op survives encode and decode
// whole; a request of another version, an unknown op or a missing field is refused with the
// code that says which; an answer that carries an error is that error.
#include "cluster/helper_protocol.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace shmipam::cluster::protocol {
namespace {

using nlohmann::json;

Scope scope() {
    return {json{{"endpoints", {"http://127.0.0.1:2379"}}}, "pool-a", "node-a", "/var/state"};
}

BlockGeometry geometry() {
    BlockGeometry g;
    g.pool_cidr = *engine::Cidr::parse("10.1.0.0/16");
    g.block_prefix = 26;
    g.usable = {{*engine::IpAddress::parse("10.1.0.1"), *engine::IpAddress::parse("10.1.0.200")}};
    g.seen = {*engine::Cidr::parse("10.1.0.0/26")};
    return g;
}

template <typename Op>
Op round_trip(const Op& op) {
    auto back = decode(encode(Request{op}));
    EXPECT_TRUE(back) << back.error().msg;
    EXPECT_TRUE(std::holds_alternative<Op>(*back));
    return std::get<Op>(*back);
}

TEST(HelperProtocol, EveryOpSurvivesEncodeAndDecodeWhole) {
    ClaimBlock c{scope(), geometry(), 7, engine::IpAddress::parse("10.1.0.9"), true, true};
    const ClaimBlock c2 = round_trip(c);
    EXPECT_EQ(c2.scope.etcd, c.scope.etcd);
    EXPECT_EQ(c2.scope.pool, "pool-a");
    EXPECT_EQ(c2.scope.node, "node-a");
    EXPECT_EQ(c2.scope.state_dir, "/var/state");
    EXPECT_EQ(c2.geometry.pool_cidr.to_string(), "10.1.0.0/16");
    EXPECT_EQ(c2.geometry.block_prefix, 26);
    ASSERT_EQ(c2.geometry.usable.size(), 1u);
    EXPECT_EQ(c2.geometry.usable[0].last.to_string(), "10.1.0.200");
    ASSERT_EQ(c2.geometry.seen.size(), 1u);
    EXPECT_EQ(c2.max_blocks, 7u);
    EXPECT_EQ(c2.address->to_string(), "10.1.0.9");
    EXPECT_TRUE(c2.ahead);
    EXPECT_TRUE(c2.lock_handed_over);

    const Refresh r2 = round_trip(Refresh{scope(), geometry()});
    EXPECT_EQ(r2.geometry.seen[0].to_string(), "10.1.0.0/26");

    TakeFixed t{scope(), geometry().usable, "sts:shop/db-0/eth0", true};
    const TakeFixed t2 = round_trip(t);
    EXPECT_EQ(t2.claim_key, "sts:shop/db-0/eth0");
    EXPECT_TRUE(t2.lock_handed_over);

    const GiveUpFixed g2 = round_trip(GiveUpFixed{scope(), "sts:shop/db-0/eth0", "/run/p", "net1"});
    EXPECT_EQ(g2.pool_state, "/run/p");
    EXPECT_EQ(g2.ifname, "net1");

    const GiveUpUnheld u2 = round_trip(GiveUpUnheld{scope(), "/run/p"});
    EXPECT_EQ(u2.pool_state, "/run/p");

    const ReadFixed f2 = round_trip(ReadFixed{scope(), "sts:shop/db-0/eth0"});
    EXPECT_EQ(f2.claim_key, "sts:shop/db-0/eth0");
    auto owner = fixed_owner_answer(
        to_json(FixedOwnerAnswer{"node-b", engine::IpAddress::parse("10.1.0.5")}).dump());
    ASSERT_TRUE(owner);
    EXPECT_EQ(owner->node, "node-b");

    const ReleaseBlock b2 =
        round_trip(ReleaseBlock{scope(), *engine::Cidr::parse("10.1.0.64/26"), "/run/p", 42});
    EXPECT_EQ(b2.block.to_string(), "10.1.0.64/26");
    EXPECT_EQ(b2.min_age_s, 42u);
}

TEST(HelperProtocol, EachRequestNamesItsOpAndTheVersion) {
    const json j = json::parse(encode(Request{Refresh{scope(), geometry()}}));
    EXPECT_EQ(j["version"], kVersion);
    EXPECT_EQ(j["op"], "refresh");
}

TEST(HelperProtocol, AnotherVersionOrAnUnknownOpIsRefusedWithCodeOne) {
    json j = json::parse(encode(Request{Refresh{scope(), geometry()}}));
    j["version"] = kVersion + 1;
    auto r = decode(j.dump());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Code::kIncompatibleVersion);
    EXPECT_NE(r.error().msg.find("version " + std::to_string(kVersion)), std::string::npos);
    j.erase("version");
    EXPECT_EQ(decode(j.dump()).error().code, Code::kIncompatibleVersion);
    j["version"] = kVersion;
    j["op"] = "borrow";
    r = decode(j.dump());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Code::kIncompatibleVersion);
    EXPECT_NE(r.error().msg.find("borrow"), std::string::npos);
}

TEST(HelperProtocol, AMissingOrMistypedFieldIsRefusedNamingIt) {
    json j = json::parse(
        encode(Request{ReleaseBlock{scope(), *engine::Cidr::parse("10.1.0.0/26"), "/run/p", 1}}));
    j.erase("block");
    auto r = decode(j.dump());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Code::kInvalidConfig);
    EXPECT_NE(r.error().msg.find("\"block\""), std::string::npos) << r.error().msg;
    json c = json::parse(encode(Request{ClaimBlock{scope(), geometry()}}));
    c["blockPrefix"] = 12;  // shorter than the pool's /16
    EXPECT_EQ(decode(c.dump()).error().code, Code::kInvalidConfig);
    c = json::parse(encode(Request{ClaimBlock{scope(), geometry()}}));
    c["pool"] = "";
    EXPECT_EQ(decode(c.dump()).error().code, Code::kInvalidConfig);
    EXPECT_EQ(decode("not json").error().code, Code::kDecode);
}

// Fields of the wrong type are refused as such, never thrown through: a plugin that died on an
// exception would answer the runtime nothing.
TEST(HelperProtocol, WrongTypedFieldsAreRefusedNotThrown) {
    auto r = decode(R"({"version": 1, "op": 5})");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Code::kIncompatibleVersion);
    auto e = block_answer(R"({"code": 50, "msg": 1, "details": []})");
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().code, Code::kUnavailable);
    EXPECT_EQ(fixed_answer(R"({"address": 7})").error().code, Code::kInternal);
    auto b = block_answer(R"({"claimed": null, "atCap": "yes"})");
    ASSERT_TRUE(b);
    EXPECT_FALSE(b->at_cap);
}

TEST(HelperProtocol, AnAnswerCarryingAnErrorIsThatErrorAndNonsenseIsInternal) {
    auto e = block_answer(
        base::envelope::error_json(make_error(Code::kUnavailable, "etcd unavailable")).dump());
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().code, Code::kUnavailable);
    EXPECT_EQ(e.error().msg, "etcd unavailable");
    EXPECT_EQ(fixed_answer("{}").error().code, Code::kInternal);
    EXPECT_EQ(give_up_answer("[1]").error().code, Code::kInternal);
    BlockAnswer a{
        engine::Cidr::parse("10.1.0.64/26"), false, {*engine::Cidr::parse("10.1.0.64/26")}};
    auto back = block_answer(to_json(a).dump());
    ASSERT_TRUE(back);
    EXPECT_EQ(back->claimed->to_string(), "10.1.0.64/26");
    EXPECT_EQ(back->blocks.size(), 1u);
}

}  // namespace
}  // namespace shmipam::cluster::protocol
