// shmipam as the IPAM of Debian's real bridge plugin, in real network namespaces: the address
// lands on the interface, two namespaces reach each other, DEL takes it away.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/e2e/e2e_support.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;

constexpr const char* kBridgePlugin = "/usr/lib/cni/bridge";

ProcessResult sh(const std::vector<std::string>& argv) {
    return run_process(argv, {}, "");
}

class BridgeE2E : public ::testing::Test {
  protected:
    void SetUp() override {
        SHMIPAM_REQUIRE_ROOT();
        ASSERT_TRUE(std::filesystem::exists(kBridgePlugin))
            << "containernetworking-plugins missing";
        // CNI_PATH holds the real bridge plugin and our plugin, as on a node.
        std::filesystem::create_directories(dir.sub("bin"));
        std::filesystem::create_symlink(kBridgePlugin, dir.sub("bin/bridge"));
        std::filesystem::create_symlink(SHMIPAM_PLUGIN_PATH, dir.sub("bin/shmipam"));
        const std::string tag = std::to_string(::getpid() % 100000);
        bridge = "shmbr" + tag;
        for (const char* n : {"a", "b"}) {
            std::string ns = "shmipam-e2e-" + std::string(n) + tag;
            ASSERT_EQ(sh({"/usr/sbin/ip", "netns", "add", ns}).exit_code, 0);
            namespaces.push_back(ns);
        }
        config = {{"cniVersion", "1.0.0"},
                  {"name", "e2e"},
                  {"type", "bridge"},
                  {"bridge", bridge},
                  {"isGateway", false},
                  {"ipam",
                   {{"type", "shmipam"},
                    {"runDir", dir.sub("run")},
                    {"dataDir", dir.sub("data")},
                    {"subnet", "10.123.0.0/24"}}}};
    }
    void TearDown() override {
        for (const auto& ns : namespaces) sh({"/usr/sbin/ip", "netns", "del", ns});
        if (!bridge.empty()) sh({"/usr/sbin/ip", "link", "del", bridge});
    }

    ProcessResult bridge_cmd(const std::string& cmd, const std::string& ns, const std::string& id) {
        std::map<std::string, std::string> env{{"CNI_COMMAND", cmd},
                                               {"CNI_CONTAINERID", id},
                                               {"CNI_NETNS", "/var/run/netns/" + ns},
                                               {"CNI_IFNAME", "eth0"},
                                               {"CNI_PATH", dir.sub("bin")}};
        return run_process({kBridgePlugin}, env, config.dump());
    }

    std::string addresses_in(const std::string& ns) {
        return sh({"/usr/sbin/ip", "netns", "exec", ns, "/usr/sbin/ip", "-4", "-o", "addr", "show"})
            .out;
    }

    TempDir dir;
    std::string bridge;
    std::vector<std::string> namespaces;
    json config;
};

TEST_F(BridgeE2E, AddressesLandInNamespacesWhichReachEachOtherAndDelRemovesThem) {
    auto a = bridge_cmd("ADD", namespaces[0], "e2e-a");
    ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
    auto b = bridge_cmd("ADD", namespaces[1], "e2e-b");
    ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
    const std::string addr_a = a.json()["ips"][0]["address"];
    const std::string addr_b = b.json()["ips"][0]["address"];
    EXPECT_EQ(addr_a, "10.123.0.2/24");
    EXPECT_EQ(addr_b, "10.123.0.3/24");
    EXPECT_NE(addresses_in(namespaces[0]).find(addr_a), std::string::npos)
        << addresses_in(namespaces[0]);
    EXPECT_NE(addresses_in(namespaces[1]).find(addr_b), std::string::npos);

    const std::string ip_b = addr_b.substr(0, addr_b.find('/'));
    auto ping =
        sh({"/usr/sbin/ip", "netns", "exec", namespaces[0], "ping", "-c", "2", "-W", "2", ip_b});
    EXPECT_EQ(ping.exit_code, 0) << ping.out << ping.err;

    auto verify = run_ctl({"--run-dir", dir.sub("run"), "verify", "e2e"});
    EXPECT_EQ(verify.exit_code, 0) << verify.out;

    auto del = bridge_cmd("DEL", namespaces[0], "e2e-a");
    ASSERT_EQ(del.exit_code, 0) << del.out << del.err;
    EXPECT_EQ(addresses_in(namespaces[0]).find(addr_a), std::string::npos);
    auto dump = run_ctl({"--run-dir", dir.sub("run"), "dump", "e2e", "--json"});
    const json doc = dump.json();
    for (const auto& s : doc["allocations"]) {
        if (s["address"] == "10.123.0.2") {
            EXPECT_EQ(s["state"], "cooling");
        }
        if (s["address"] == "10.123.0.3") {
            EXPECT_EQ(s["state"], "allocated");
        }
    }
    ASSERT_EQ(bridge_cmd("DEL", namespaces[1], "e2e-b").exit_code, 0);
}

}  // namespace
}  // namespace shmipam::testing
