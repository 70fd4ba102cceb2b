// A node switched from host-local: the real host-local plugin allocates first, then shmipam takes
// over the same dataDir and never hands those addresses out until their containers are DELeted.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "tests/e2e/e2e_support.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;

constexpr const char* kHostLocal = "/usr/lib/cni/host-local";

TEST(HostLocalMigration, ImportedAddressesAreNeverHandedOutUntilDeleted) {
    ASSERT_TRUE(std::filesystem::exists(kHostLocal)) << "containernetworking-plugins missing";
    TempDir dir;
    // /28: .2 .. .14 usable (.1 gateway, .15 broadcast).
    json hl = {
        {"cniVersion", "1.0.0"},
        {"name", "mig"},
        {"type", "bridge"},
        {"ipam",
         {{"type", "host-local"}, {"dataDir", dir.sub("data")}, {"subnet", "10.124.0.0/28"}}}};
    std::set<std::string> host_local_addrs;
    for (const char* c : {"old-1", "old-2", "old-3"}) {
        auto r = run_process({kHostLocal}, cni_env("ADD", c), hl.dump());
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
        std::string a = r.json()["ips"][0]["address"];
        host_local_addrs.insert(a.substr(0, a.find('/')));
    }
    ASSERT_TRUE(std::filesystem::exists(dir.sub("data/mig/10.124.0.2")));

    json ours = hl;
    ours["ipam"] = {{"type", "shmipam"},
                    {"dataDir", dir.sub("data")},
                    {"runDir", dir.sub("run")},
                    {"reuseDelay", 0},
                    {"subnet", "10.124.0.0/28"}};
    // Fill the network: 13 usable, 3 held by host-local's pods.
    std::set<std::string> ours_addrs;
    for (int i = 0; i < 10; ++i) {
        auto r = run_plugin(cni_env("ADD", "new-" + std::to_string(i)), ours.dump());
        ASSERT_EQ(r.exit_code, 0) << r.out;
        std::string a = r.json()["ips"][0]["address"];
        a = a.substr(0, a.find('/'));
        EXPECT_EQ(host_local_addrs.count(a), 0u) << a << " belongs to a host-local pod";
        ours_addrs.insert(a);
    }
    auto full = run_plugin(cni_env("ADD", "one-more"), ours.dump());
    EXPECT_EQ(full.json()["code"], 100) << full.out;

    // A repeated ADD of a host-local pod returns its address (a runtime retry after the switch).
    auto again = run_plugin(cni_env("ADD", "old-2"), ours.dump());
    ASSERT_EQ(again.exit_code, 0) << again.out;
    EXPECT_EQ(again.json()["ips"][0]["address"], "10.124.0.3/28");

    // The runtime DELs a host-local pod: its address is free again, and only then.
    ASSERT_EQ(run_plugin(cni_env("DEL", "old-1"), ours.dump()).exit_code, 0);
    auto reuse = run_plugin(cni_env("ADD", "one-more"), ours.dump());
    ASSERT_EQ(reuse.exit_code, 0) << reuse.out;
    EXPECT_EQ(reuse.json()["ips"][0]["address"], "10.124.0.2/28");
    auto verify = run_ctl({"--run-dir", dir.sub("run"), "verify", "mig"});
    EXPECT_EQ(verify.exit_code, 0) << verify.out;
}

}  // namespace
}  // namespace shmipam::testing
