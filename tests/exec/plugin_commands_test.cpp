// The built plugin binary, driven as a runtime drives it: every command, every result version.
#include <gtest/gtest.h>

#include <set>

#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;

class PluginCommands : public ::testing::TestWithParam<std::string> {
  protected:
    TempDir dir;
    json config() { return make_config(dir.path(), "net", GetParam()); }
};

TEST_P(PluginCommands, AddCheckDelInTheConfigVersion) {
    const std::string v = GetParam();
    json cfg = config();
    cfg["ipam"]["routes"] = json::parse(R"([{"dst":"0.0.0.0/0"}])");
    auto add = run_plugin(cni_env("ADD", "ctr1"), cfg.dump());
    ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
    json r = add.json();
    EXPECT_EQ(r["cniVersion"], v);
    EXPECT_EQ(r["ips"][0]["address"], "10.10.0.2/24");
    EXPECT_EQ(r["ips"][0]["gateway"], "10.10.0.1");
    EXPECT_EQ(r["routes"][0]["dst"], "0.0.0.0/0");
    EXPECT_TRUE(r["dns"].is_object());
    EXPECT_EQ(r["ips"][0].contains("version"), v < "1.0.0") << r.dump();

    json check_cfg = cfg;
    check_cfg["prevResult"] = r;
    auto check = run_plugin(cni_env("CHECK", "ctr1"), check_cfg.dump());
    if (v < "0.4.0") {
        EXPECT_NE(check.exit_code, 0);
        EXPECT_EQ(check.json()["code"], 1) << check.out;
    } else {
        EXPECT_EQ(check.exit_code, 0) << check.out;
    }

    auto del = run_plugin(cni_env("DEL", "ctr1"), cfg.dump());
    EXPECT_EQ(del.exit_code, 0) << del.out;
    EXPECT_EQ(del.out, "");
    auto del_again = run_plugin(cni_env("DEL", "ctr1"), cfg.dump());
    EXPECT_EQ(del_again.exit_code, 0) << "DEL is idempotent";
}

TEST_P(PluginCommands, GcAndStatusNeedVersion110) {
    const std::string v = GetParam();
    json cfg = config();
    ASSERT_EQ(run_plugin(cni_env("ADD", "keep"), cfg.dump()).exit_code, 0);
    ASSERT_EQ(run_plugin(cni_env("ADD", "drop"), cfg.dump()).exit_code, 0);
    cfg["cni.dev/valid-attachments"] = json::parse(R"([{"containerID":"keep","ifname":"eth0"}])");
    auto gc = run_plugin({{"CNI_COMMAND", "GC"}, {"CNI_PATH", "/x"}}, cfg.dump());
    auto status = run_plugin({{"CNI_COMMAND", "STATUS"}, {"CNI_PATH", "/x"}}, cfg.dump());
    if (v != "1.1.0") {
        EXPECT_EQ(gc.json()["code"], 1);
        EXPECT_EQ(status.json()["code"], 1);
        return;
    }
    EXPECT_EQ(gc.exit_code, 0) << gc.out;
    EXPECT_EQ(status.exit_code, 0) << status.out;
    auto dump = run_ctl({"--run-dir", dir.sub("run"), "dump", "net", "--json"});
    std::vector<std::string> held;
    const json doc = dump.json();
    for (const auto& a : doc["allocations"]) {
        if (a["state"] == "allocated") held.push_back(a["containerID"]);
    }
    EXPECT_EQ(held, std::vector<std::string>{"keep"}) << dump.out << dump.err;
}

INSTANTIATE_TEST_SUITE_P(EveryVersion, PluginCommands,
                         ::testing::Values("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"));

// stdin is read in growing pieces: a config of 200 KB (a long prevResult, many unknown fields)
// arrives whole, however the pipe splits it (a truncated one would not parse).
TEST(PluginAdd, AConfigLongerThanOneReadArrivesWhole) {
    TempDir dir;
    json cfg = make_config(dir.path(), "net", "1.1.0");
    cfg["padding"] = std::string(200'000, 'x');
    cfg["ipam"]["routes"] = json::parse(R"([{"dst":"192.0.2.0/24"}])");
    auto add = run_plugin(cni_env("ADD", "ctr1"), cfg.dump());
    ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
    EXPECT_EQ(add.json()["routes"][0]["dst"], "192.0.2.0/24") << add.out;
}

TEST(PluginVersion, ReportsSupportedVersions) {
    auto r = run_plugin({{"CNI_COMMAND", "VERSION"}}, "");
    ASSERT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.json()["supportedVersions"],
              json::parse(R"(["0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"])"));
}

TEST(PluginStatus, UnavailableWhenARangeSetIsFull) {
    TempDir dir;
    json cfg = make_config(dir.path(), "tiny", "1.1.0", "10.11.0.0/30");  // one usable: .2
    ASSERT_EQ(run_plugin(cni_env("ADD", "only"), cfg.dump()).exit_code, 0);
    auto status = run_plugin({{"CNI_COMMAND", "STATUS"}, {"CNI_PATH", "/x"}}, cfg.dump());
    EXPECT_NE(status.exit_code, 0);
    EXPECT_EQ(status.json()["code"], 50) << status.out;
}

TEST(PluginCheck, FailsWhenMissingOrDifferent) {
    TempDir dir;
    json cfg = make_config(dir.path(), "net", "1.0.0");
    auto missing = run_plugin(cni_env("CHECK", "nobody"), cfg.dump());
    EXPECT_EQ(missing.json()["code"], 110) << missing.out;
    auto add = run_plugin(cni_env("ADD", "c"), cfg.dump());
    json wrong = add.json();
    wrong["ips"][0]["address"] = "10.10.0.99/24";
    cfg["prevResult"] = wrong;
    auto differs = run_plugin(cni_env("CHECK", "c"), cfg.dump());
    EXPECT_EQ(differs.json()["code"], 111) << differs.out;
}

TEST(PluginAdd, DualStackResolvConfAndPodIdentity) {
    TempDir dir;
    write_file(dir.sub("resolv.conf"), "nameserver 10.96.0.10\nsearch default.svc.cluster.local\n");
    json cfg = make_config(dir.path(), "ds", "1.0.0");
    cfg["ipam"]["ranges"] = json::parse(
        R"([[{"subnet":"10.12.0.0/24","gateway":"10.12.0.254"}],[{"subnet":"fd12::/64"}]])");
    cfg["ipam"]["resolvConf"] = dir.sub("resolv.conf");
    auto add = run_plugin(
        cni_env("ADD", "pod1", "eth0", "IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-0"),
        cfg.dump());
    ASSERT_EQ(add.exit_code, 0) << add.out;
    json r = add.json();
    EXPECT_EQ(r["ips"][0]["address"], "10.12.0.1/24") << "gateway moved, .1 is usable";
    EXPECT_EQ(r["ips"][0]["gateway"], "10.12.0.254");
    EXPECT_EQ(r["ips"][1]["address"], "fd12::2/64");
    EXPECT_EQ(r["dns"]["nameservers"][0], "10.96.0.10");
    auto dump = run_ctl({"--run-dir", dir.sub("run"), "dump", "ds", "--json"});
    EXPECT_EQ(dump.json()["allocations"][0]["pod"], "shop/web-0") << dump.out;
}

TEST(PluginAdd, RequestedAddressesFromEverySource) {
    TempDir dir;
    json cfg = make_config(dir.path(), "req", "1.0.0");
    auto by_env = run_plugin(cni_env("ADD", "a", "eth0", "IP=10.10.0.77"), cfg.dump());
    EXPECT_EQ(by_env.json()["ips"][0]["address"], "10.10.0.77/24") << by_env.out;
    json rc = cfg;
    rc["runtimeConfig"] = {{"ips", {"10.10.0.78/24"}}};
    EXPECT_EQ(run_plugin(cni_env("ADD", "b", "eth0", "IP=10.10.0.90"), rc.dump())
                  .json()["ips"][0]["address"],
              "10.10.0.78/24");
    json args = rc;
    args["args"] = {{"cni", {{"ips", {"10.10.0.79"}}}}};
    EXPECT_EQ(run_plugin(cni_env("ADD", "c"), args.dump()).json()["ips"][0]["address"],
              "10.10.0.79/24");
}

TEST(PluginAdd, ConcurrentRetryOfOneAttachmentNeverTakesTwoAddresses) {
    TempDir dir;
    json cfg = make_config(dir.path(), "retry", "1.0.0");
    for (int round = 0; round < 5; ++round) {
        std::vector<std::unique_ptr<Child>> kids;
        for (int i = 0; i < 8; ++i) {
            kids.push_back(std::make_unique<Child>(std::vector<std::string>{SHMIPAM_PLUGIN_PATH},
                                                   cni_env("ADD", "same" + std::to_string(round)),
                                                   cfg.dump()));
        }
        std::set<std::string> addrs;
        for (auto& k : kids) {
            auto r = k->wait();
            if (r.exit_code == 0) {
                addrs.insert(r.json()["ips"][0]["address"]);
            } else {
                EXPECT_EQ(r.json()["code"], 11) << r.out;
            }
        }
        EXPECT_EQ(addrs.size(), 1u);
    }
    auto verify = run_ctl({"--run-dir", dir.sub("run"), "verify", "retry"});
    EXPECT_EQ(verify.exit_code, 0) << verify.out;
    auto dump = run_ctl({"--run-dir", dir.sub("run"), "dump", "retry", "--json"});
    EXPECT_EQ(dump.json()["allocations"].size(), 5u);
}

}  // namespace
}  // namespace shmipam::testing
