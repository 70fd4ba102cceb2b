// Hundreds of real plugin processes at once on one network.
#include <gtest/gtest.h>

#include <set>

#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;

std::vector<ProcessResult> run_all(const std::vector<std::map<std::string, std::string>>& envs,
                                   const std::string& config) {
    std::vector<std::unique_ptr<Child>> kids;
    for (const auto& e : envs) {
        kids.push_back(
            std::make_unique<Child>(std::vector<std::string>{SHMIPAM_PLUGIN_PATH}, e, config));
    }
    std::vector<ProcessResult> out;
    for (auto& k : kids) out.push_back(k->wait());
    return out;
}

TEST(ConcurrentProcesses, TwoHundredAddsThenDelsOnOneNetwork) {
    TempDir dir;
    const std::string cfg = make_config(dir.path(), "busy", "1.0.0", "10.20.0.0/24").dump();
    constexpr int kN = 200;
    std::vector<std::map<std::string, std::string>> adds, dels;
    for (int i = 0; i < kN; ++i) {
        adds.push_back(cni_env("ADD", "pod" + std::to_string(i)));
        dels.push_back(cni_env("DEL", "pod" + std::to_string(i)));
    }
    std::set<std::string> addrs;
    for (const auto& r : run_all(adds, cfg)) {
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
        EXPECT_TRUE(addrs.insert(r.json()["ips"][0]["address"]).second)
            << "duplicate " << r.json()["ips"][0]["address"];
    }
    EXPECT_EQ(addrs.size(), size_t(kN));
    auto verify = run_ctl({"--run-dir", dir.sub("run"), "verify", "busy"});
    EXPECT_EQ(verify.exit_code, 0) << verify.out;
    for (const auto& r : run_all(dels, cfg)) ASSERT_EQ(r.exit_code, 0) << r.out;
    verify = run_ctl({"--run-dir", dir.sub("run"), "verify", "busy", "--json"});
    EXPECT_EQ(verify.exit_code, 0) << verify.out;
    auto dump = run_ctl({"--run-dir", dir.sub("run"), "dump", "busy", "--json"});
    const json doc = dump.json();
    ASSERT_EQ(doc["allocations"].size(), 200u);
    for (const auto& a : doc["allocations"]) EXPECT_EQ(a["state"], "cooling") << a.dump();
}

TEST(ConcurrentProcesses, FillingASlash24GivesExactlyTheUsableAddresses) {
    TempDir dir;
    const std::string cfg = make_config(dir.path(), "fill", "1.0.0", "10.21.0.0/24").dump();
    std::vector<std::map<std::string, std::string>> adds;
    for (int i = 0; i < 260; ++i) adds.push_back(cni_env("ADD", "c" + std::to_string(i)));
    std::set<std::string> addrs;
    int no_address = 0;
    for (const auto& r : run_all(adds, cfg)) {
        if (r.exit_code == 0) {
            EXPECT_TRUE(addrs.insert(r.json()["ips"][0]["address"]).second);
        } else {
            EXPECT_EQ(r.json()["code"], 100) << r.out;
            ++no_address;
        }
    }
    EXPECT_EQ(addrs.size(), 253u);
    EXPECT_EQ(no_address, 7);
    auto verify = run_ctl({"--run-dir", dir.sub("run"), "verify", "fill"});
    EXPECT_EQ(verify.exit_code, 0) << verify.out;
}

// The reboot storm: a run directory that is not tmpfs survives a reboot, and a hundred
// first ADDs of the new boot arrive at once. One of them retires the old boot's index and
// rebuilds (under the state directory's lock); the others wait for it or answer 11, and the
// runtime's retry then succeeds. No address is given twice, the old boot's sandboxes are
// reclaimed, and verify is clean.
TEST(ConcurrentProcesses, AHundredFirstAddsAfterARebootWithASurvivingRunDirectory) {
    TempDir dir;
    write_file(dir.sub("boot_id"), "11111111-2222-3333-4444-555555555555\n");
    json config = make_config(dir.path(), "storm", "1.0.0", "10.22.0.0/24");
    config["ipam"]["bootIdFile"] = dir.sub("boot_id");
    const std::string cfg = config.dump();
    std::vector<std::map<std::string, std::string>> before;
    for (int i = 0; i < 60; ++i) before.push_back(cni_env("ADD", "old" + std::to_string(i)));
    for (const auto& r : run_all(before, cfg)) ASSERT_EQ(r.exit_code, 0) << r.out << r.err;

    write_file(dir.sub("boot_id"), "99999999-2222-3333-4444-555555555555\n");  // rebooted
    constexpr int kN = 100;
    std::map<std::string, std::string> got;  // container -> address
    std::vector<std::string> pending;
    for (int i = 0; i < kN; ++i) pending.push_back("new" + std::to_string(i));
    for (int round = 0; round < 20 && !pending.empty(); ++round) {
        std::vector<std::map<std::string, std::string>> envs;
        for (const auto& id : pending) envs.push_back(cni_env("ADD", id));
        const auto results = run_all(envs, cfg);
        std::vector<std::string> again;
        for (size_t k = 0; k < results.size(); ++k) {
            const auto& r = results[k];
            if (r.exit_code == 0) {
                got[pending[k]] = r.json()["ips"][0]["address"];
                continue;
            }
            ASSERT_EQ(r.json()["code"], 11) << "only 'try again' is expected: " << r.out;
            again.push_back(pending[k]);
        }
        pending = again;
    }
    ASSERT_TRUE(pending.empty()) << pending.size() << " ADDs never succeeded";
    std::set<std::string> distinct;
    for (const auto& [id, a] : got) EXPECT_TRUE(distinct.insert(a).second) << "duplicate " << a;
    EXPECT_EQ(distinct.size(), size_t(kN));
    auto verify = run_ctl({"--run-dir", dir.sub("run"), "verify", "storm"});
    EXPECT_EQ(verify.exit_code, 0) << verify.out;
    auto dump = run_ctl({"--run-dir", dir.sub("run"), "dump", "storm", "--json"});
    const json doc = dump.json();  // kept: the loop refers into it
    size_t allocated = 0;
    for (const auto& a : doc["allocations"]) allocated += a["state"] == "allocated";
    EXPECT_EQ(allocated, size_t(kN)) << "the old boot's sandboxes were not all reclaimed";
}

}  // namespace
}  // namespace shmipam::testing
