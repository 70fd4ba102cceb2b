// One reader of the network config for the plugin and every tool (ipam/config.h): a .conflist's
// shmipam plugin found as a tool is handed the file the runtime reads, the tool's command line
// standing for what the file leaves out, and a field of the wrong type refused by the tools as
// the plugin refuses it (no tool reading its own lenient copy with defaults of its own).
#include <gtest/gtest.h>

#include "ipam/config.h"

namespace shmipam::ipam {
namespace {

using nlohmann::json;

json cluster_plugin() {
    return json::parse(R"({"type": "shmipam", "poolsDir": "/etc/pools", "nodeName": "node-a",
        "etcd": {"endpoints": ["http://127.0.0.1:2379"]}, "blockMinAgeS": 60,
        "fixedAddressPools": ["sts"]})");
}

json conflist(const json& ipam) {
    return {{"cniVersion", "1.1.0"},
            {"name", "pods"},
            {"plugins",
             json::array({{{"type", "bridge"}, {"bridge", "cni0"}, {"ipam", ipam}},
                          {{"type", "portmap"}, {"capabilities", {{"portMappings", true}}}}})}};
}

TEST(NetworkConfig, AConflistsShmipamPluginIsReadWithTheListsName) {
    auto s = read_network_text(conflist(cluster_plugin()).dump(), "10-pods.conflist");
    ASSERT_TRUE(s) << s.error().msg;
    EXPECT_EQ(s->network.name, "pods");
    ASSERT_TRUE(s->pools && s->pools->cluster);
    EXPECT_EQ(s->pools->node_name, "node-a");
    EXPECT_EQ(s->pools->cluster->block_min_age_s, 60u);
    EXPECT_EQ(s->pools->cluster->fixed_pools, std::set<std::string>{"sts"});
    EXPECT_EQ(s->network.block_prefix_v4, 26) << "cluster mode's block size, as the plugin's";

    json other = conflist(json{{"type", "host-local"}, {"subnet", "10.1.0.0/24"}});
    other["plugins"].push_back({{"type", "tuning"}, {"ipam", {{"type", "dhcp"}}}});
    auto none = read_network_text(other.dump(), "10-other.conflist");
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error().code, Code::kDecode);
    EXPECT_NE(none.error().msg.find("10-other.conflist"), std::string::npos) << none.error().msg;
    EXPECT_EQ(read_network_text("{\"name\": ", "cut.conf").error().code, Code::kDecode);
}

// The tool's --run-dir stands only where the config names no runDir, and its --node for
// ipam.nodeName: cluster mode then reads no node-name file.
TEST(NetworkConfig, TheToolsCommandLineStandsForWhatTheFileLeavesOut) {
    json plugin = cluster_plugin();
    plugin.erase("nodeName");
    plugin["nodeNameFile"] = "/nonexistent/nodename";
    const std::string text = conflist(plugin).dump();
    auto unnamed = read_network_text(text, "c");
    ASSERT_FALSE(unnamed) << "cluster mode never falls back to the host name";
    EXPECT_NE(unnamed.error().msg.find("nodeName"), std::string::npos) << unnamed.error().msg;
    auto named = read_network_text(text, "c", {"/run/elsewhere", "node-b"});
    ASSERT_TRUE(named) << named.error().msg;
    EXPECT_EQ(named->pools->node_name, "node-b");
    EXPECT_EQ(named->network.run_dir, "/run/elsewhere");
    plugin["runDir"] = "/run/configured";
    auto configured = read_network_text(conflist(plugin).dump(), "c", {"/run/elsewhere", "node-b"});
    ASSERT_TRUE(configured);
    EXPECT_EQ(configured->network.run_dir, "/run/configured");
    EXPECT_FALSE(read_network_text(text, "c", {"", "Node-B"})) << "no Node object has that name";
}

// Before one reader, the cluster verbs read blockMinAgeS leniently: a string was taken as the
// default 300 s while the plugin refused the config, so the node pass gave blocks back on
// another schedule than the one configured.
TEST(NetworkConfig, AFieldOfTheWrongTypeIsRefusedNamingItNotReadAsTheDefault) {
    for (const auto& [field, value] :
         std::vector<std::pair<std::string, json>>{{"blockMinAgeS", "300"},
                                                   {"fixedAddressPools", "sts"},
                                                   {"runDir", 5},
                                                   {"poolsDir", json::array()}}) {
        json plugin = cluster_plugin();
        plugin[field] = value;
        auto s = read_network_text(conflist(plugin).dump(), "c");
        ASSERT_FALSE(s) << field;
        EXPECT_NE(s.error().msg.find(field), std::string::npos) << s.error().msg;
    }
}

TEST(NetworkConfig, PodMetadataAndValidAttachmentsAreReadAsARuntimePassesThem) {
    const json doc = json::parse(R"({
        "runtimeConfig": {"io.kubernetes.cri.pod-annotations": {"a": "1"}},
        "args": {"cni": {"labels": [{"key": "app", "value": "web"}]}}})");
    auto m = read_pod_metadata(doc);
    ASSERT_TRUE(m) << m.error().msg;
    EXPECT_EQ(m->annotations.at("a"), "1");
    EXPECT_EQ(m->labels.at("app"), "web");
    EXPECT_EQ(read_pod_metadata(json::parse(R"({"args": {"cni": {"labels": {"app": "web"}}}})"))
                  .error()
                  .code,
              Code::kDecode);
    auto keys =
        read_valid_attachments(json::parse(R"([{"containerID": "c", "ifname": "eth0"}])"), "list");
    ASSERT_TRUE(keys);
    EXPECT_EQ(keys->at(0).ifname, "eth0");
    EXPECT_EQ(read_valid_attachments(json::parse(R"([{"containerID": 1}])"), "list").error().code,
              Code::kDecode);
}

}  // namespace
}  // namespace shmipam::ipam
