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

}  // namespace
}  // namespace shmipam::testing
