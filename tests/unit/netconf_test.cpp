#include "plugin/netconf.h"

#include <gtest/gtest.h>

#include "plugin/cni_result.h"

namespace shmipam::cni {
namespace {

using nlohmann::json;

json base() {
    return json::parse(R"({"cniVersion":"1.0.0","name":"net1","type":"bridge","bridge":"cni0",
        "isGateway":true,"ipam":{"type":"shmipam","subnet":"10.1.0.0/24"}})");
}

// As the plugin reads a config: its version gated first (plugin/commands.cpp), then the request.
Expected<ipam::Request> parse(const json& j, const CniArgs& a = {}) {
    auto version = read_cni_version(j);
    if (!version) return version.error();
    return parse_request(j, CniEnv{}, a);
}

std::vector<std::string> texts(const std::vector<engine::IpAddress>& addresses) {
    std::vector<std::string> out;
    for (const auto& a : addresses) out.push_back(a.to_string());
    return out;
}

TEST(NetConf, LegacyTopLevelRangeWithDefaults) {
    auto nc = parse(base());
    ASSERT_TRUE(nc) << nc.error().msg;
    EXPECT_EQ(*read_cni_version(base()), "1.0.0");
    EXPECT_EQ(nc->network.name, "net1");
    EXPECT_EQ(nc->network.data_dir, "/var/lib/cni/networks");
    EXPECT_EQ(nc->network.run_dir, "/run/shmipam");
    EXPECT_EQ(nc->network.reuse_delay_ms, 30000u);
    ASSERT_EQ(nc->network.range_sets.size(), 1u);
    EXPECT_EQ(nc->network.range_sets[0][0].gateway.to_string(), "10.1.0.1");
}

TEST(NetConf, RangesPlusLegacyPlusRuntimeIpRangesInHostLocalOrder) {
    json j = base();
    j["ipam"]["ranges"] = json::parse(R"([[{"subnet":"fd00::/64"}]])");
    j["runtimeConfig"] = json::parse(R"({"ipRanges":[[{"subnet":"10.9.0.0/24"}]]})");
    auto nc = parse(j);
    ASSERT_TRUE(nc) << nc.error().msg;
    ASSERT_EQ(nc->network.range_sets.size(), 3u);
    EXPECT_EQ(nc->network.range_sets[0][0].subnet.to_string(), "10.9.0.0/24");
    EXPECT_EQ(nc->network.range_sets[1][0].subnet.to_string(), "10.1.0.0/24");
    EXPECT_EQ(nc->network.range_sets[2][0].subnet.to_string(), "fd00::/64");
}

TEST(NetConf, UnknownFieldsAreIgnored) {
    json j = base();
    j["somethingElse"] = {{"deep", {1, 2, 3}}};
    j["ipam"]["futureField"] = "x";
    EXPECT_TRUE(parse(j));
}

TEST(NetConf, RequestedAddressPrecedence) {
    json j = base();
    CniArgs args;
    args.ips = {"10.1.0.30"};
    EXPECT_EQ(texts(parse(j, args)->requested), std::vector<std::string>{"10.1.0.30"});
    j["runtimeConfig"] = {{"ips", {"10.1.0.20/24"}}};
    EXPECT_EQ(texts(parse(j, args)->requested), std::vector<std::string>{"10.1.0.20"});
    j["args"] = {{"cni", {{"ips", {"10.1.0.10"}}}}};
    EXPECT_EQ(texts(parse(j, args)->requested), std::vector<std::string>{"10.1.0.10"});
}

TEST(NetConf, WrongTypesAreDecodeErrors) {
    for (auto mutate : std::vector<std::function<void(json&)>>{
             [](json& j) { j["ipam"]["subnet"] = 5; },
             [](json& j) { j["ipam"]["ranges"] = "x"; },
             [](json& j) { j["ipam"]["ranges"] = json::parse("[[5]]"); },
             [](json& j) { j["ipam"]["dataDir"] = true; },
             [](json& j) {
                 j["ipam"]["routes"] = {{"gw", "1.2.3.4"}};
             },
             [](json& j) { j["ipam"] = "shmipam"; },
             [](json& j) { j["name"] = 3; },
             [](json& j) { j["cniVersion"] = 1.0; },
             [](json& j) {
                 j["args"] = {{"cni", {{"ips", "10.1.0.3"}}}};
             },
         }) {
        json j = base();
        mutate(j);
        auto nc = parse(j);
        ASSERT_FALSE(nc) << j.dump();
        EXPECT_EQ(nc.error().code, Code::kDecode) << j.dump() << " -> " << nc.error().msg;
    }
}

TEST(NetConf, InvalidValuesAreConfigErrors) {
    for (auto mutate : std::vector<std::function<void(json&)>>{
             [](json& j) { j["ipam"]["subnet"] = "10.1.0.0/33"; },
             [](json& j) { j["ipam"]["subnet"] = "10.1.0.0/31"; },
             [](json& j) { j["ipam"]["subnet"] = "10.1.0.5/24"; },
             [](json& j) { j["ipam"].erase("subnet"); },
             [](json& j) { j.erase("ipam"); },
             [](json& j) { j["name"] = "../etc"; },
             [](json& j) { j["name"] = ""; },
             [](json& j) { j["name"] = "a/b"; },
             [](json& j) { j["ipam"]["reuseDelay"] = -1; },
             [](json& j) { j["ipam"]["reuseDelay"] = "soon"; },
             [](json& j) { j["ipam"]["blockSize"] = 8; },
             [](json& j) { j["ipam"]["routes"] = json::parse(R"([{"dst":"nope"}])"); },
             [](json& j) { j["ipam"]["ranges"] = json::parse(R"([[{"subnet":"10.1.0.0/16"}]])"); },
         }) {
        json j = base();
        mutate(j);
        auto nc = parse(j);
        ASSERT_FALSE(nc) << j.dump();
        EXPECT_EQ(nc.error().code, Code::kInvalidConfig) << j.dump() << " -> " << nc.error().msg;
    }
}

TEST(NetConf, VersionGate) {
    for (const char* v : {"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}) {
        json j = base();
        j["cniVersion"] = v;
        EXPECT_TRUE(parse(j)) << v;
    }
    for (const char* v : {"0.1.0", "0.2.0", "2.0.0", "banana"}) {
        json j = base();
        j["cniVersion"] = v;
        auto nc = parse(j);
        ASSERT_FALSE(nc);
        EXPECT_EQ(nc.error().code, Code::kIncompatibleVersion) << v;
    }
    json j = base();
    j.erase("cniVersion");
    EXPECT_EQ(parse(j).error().code, Code::kIncompatibleVersion);
    EXPECT_TRUE(version_at_least("1.1.0", "1.0.0"));
    EXPECT_TRUE(version_at_least("0.4.0", "0.4.0"));
    EXPECT_FALSE(version_at_least("0.3.1", "0.4.0"));
}

TEST(NetConf, ReuseDelayForms) {
    json j = base();
    j["ipam"]["reuseDelay"] = 0;
    EXPECT_EQ(parse(j)->network.reuse_delay_ms, 0u);
    j["ipam"]["reuseDelay"] = 1.5;
    EXPECT_EQ(parse(j)->network.reuse_delay_ms, 1500u);
    j["ipam"]["reuseDelay"] = "250ms";
    EXPECT_EQ(parse(j)->network.reuse_delay_ms, 250u);
    j["ipam"]["reuseDelay"] = "2m";
    EXPECT_EQ(parse(j)->network.reuse_delay_ms, 120000u);
}

TEST(NetConf, ValidAttachmentsForGc) {
    json j = base();
    j["cniVersion"] = "1.1.0";
    j["cni.dev/valid-attachments"] = json::parse(R"([{"containerID":"a","ifname":"eth0"}])");
    auto nc = parse(j);
    ASSERT_TRUE(nc);
    ASSERT_TRUE(nc->valid_attachments);
    EXPECT_EQ(nc->valid_attachments->at(0).container_id, "a");
    j["cni.dev/valid-attachments"] = json::parse(R"([{"containerID":1}])");
    EXPECT_EQ(parse(j).error().code, Code::kDecode);
}

TEST(CniResult, ShapeDependsOnVersion) {
    json routes = json::parse(R"([{"dst":"0.0.0.0/0"}])");
    ipam::AddResult added{
        {{*engine::IpAddress::parse("10.1.0.2"), 24, engine::IpAddress::parse("10.1.0.1")}},
        routes};
    json r100 = make_result("1.0.0", added, json::object());
    EXPECT_EQ(r100["ips"][0]["address"], "10.1.0.2/24");
    EXPECT_EQ(r100["ips"][0]["gateway"], "10.1.0.1");
    EXPECT_FALSE(r100["ips"][0].contains("version"));
    EXPECT_EQ(r100["routes"], routes);
    EXPECT_TRUE(r100["dns"].is_object());
    added.routes = json::array();
    json r031 = make_result("0.3.1", added, json::object());
    EXPECT_EQ(r031["ips"][0]["version"], "4");
    EXPECT_FALSE(r031.contains("routes"));
    json err = make_error_json("0.4.0", make_error(Code::kInvalidConfig, "bad", "why"));
    EXPECT_EQ(err["code"], 7);
    EXPECT_EQ(err["msg"], "bad");
    EXPECT_EQ(err["details"], "why");
    EXPECT_EQ(err["cniVersion"], "0.4.0");
}

}  // namespace
}  // namespace shmipam::cni

namespace shmipam::cni {
namespace {

// Cluster mode (docs/cluster.md): ipam.etcd with poolsDir; Calico's block sizes unless set.
TEST(NetConfCluster, EtcdWithPoolsDirIsClusterModeWithCalicosBlockSizes) {
    json j = json::parse(R"({"cniVersion":"1.1.0","name":"n","type":"bridge",
        "ipam":{"type":"shmipam","poolsDir":"/etc/pools","nodeName":"a",
                "etcd":{"endpoints":["https://10.0.0.1:2379"],"caFile":"/ca"},
                "maxBlocksPerNode":8}})");
    auto nc = parse(j);
    ASSERT_TRUE(nc) << nc.error().msg;
    ASSERT_TRUE(nc->pools && nc->pools->cluster);
    EXPECT_EQ(nc->pools->cluster->max_blocks, 8u);
    EXPECT_EQ(nc->pools->cluster->etcd["caFile"], "/ca");
    EXPECT_EQ(nc->network.block_prefix_v4, 26);
    EXPECT_EQ(nc->network.block_prefix_v6, 122);
    j["ipam"]["blockSize"] = 28;
    EXPECT_EQ(parse(j)->network.block_prefix_v4, 28);
    EXPECT_EQ(nc->pools->cluster->claim_ahead_percent, 75u);
    j["ipam"]["claimAheadPercent"] = 0;
    EXPECT_EQ(parse(j)->pools->cluster->claim_ahead_percent, 0u);
    EXPECT_EQ(nc->pools->cluster->block_min_age_s, 300u);
    j["ipam"]["blockMinAgeS"] = 0;
    EXPECT_EQ(parse(j)->pools->cluster->block_min_age_s, 0u);
    for (json bad : {json(-5), json("300")}) {
        j["ipam"]["blockMinAgeS"] = bad;
        auto r = parse(j);
        ASSERT_FALSE(r) << bad;
        EXPECT_NE(r.error().msg.find("blockMinAgeS"), std::string::npos) << r.error().msg;
    }
    j["ipam"].erase("blockMinAgeS");
    j["ipam"]["fixedAddressPools"] = json::array({"sts", "vm"});
    EXPECT_EQ(parse(j)->pools->cluster->fixed_pools, (std::set<std::string>{"sts", "vm"}));
    j["ipam"]["fixedAddressPools"] = "sts";
    EXPECT_FALSE(parse(j));
    j["ipam"].erase("fixedAddressPools");
    for (json bad : {json(100), json(-1), json("75")}) {
        j["ipam"]["claimAheadPercent"] = bad;
        auto r = parse(j);
        ASSERT_FALSE(r) << bad;
        EXPECT_NE(r.error().msg.find("claimAheadPercent"), std::string::npos) << r.error().msg;
    }
}

TEST(NetConfCluster, EtcdWithoutPoolsDirOrEndpointsIsRefused) {
    json ranges = json::parse(R"({"cniVersion":"1.1.0","name":"n","type":"bridge",
        "ipam":{"type":"shmipam","subnet":"10.1.0.0/24","etcd":{"endpoints":["http://e:2379"]}}})");
    auto r = parse(ranges);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Code::kInvalidConfig);
    EXPECT_NE(r.error().msg.find("poolsDir"), std::string::npos) << r.error().msg;
    json empty = json::parse(R"({"cniVersion":"1.1.0","name":"n","type":"bridge",
        "ipam":{"type":"shmipam","poolsDir":"/p","etcd":{"endpoints":[]}}})");
    auto e = parse(empty);
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().code, Code::kInvalidConfig);
    json typo = json::parse(R"({"cniVersion":"1.1.0","name":"n","type":"bridge",
        "ipam":{"type":"shmipam","poolsDir":"/p",
                "etcd":{"endpoints":["http://e:2379"],"budgetMs":"5000"}}})");
    auto t = parse(typo);
    ASSERT_FALSE(t);
    EXPECT_NE(t.error().msg.find("ipam.etcd.budgetMs"), std::string::npos) << t.error().msg;
}

}  // namespace
}  // namespace shmipam::cni
