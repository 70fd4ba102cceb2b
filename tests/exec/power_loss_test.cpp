// Power loss and reboot, with real plugin processes.
//
// The power-loss model: every ADD and DEL makes its journal records durable before it answers,
// so a record may be lost only if its operation never answered. The test runs rounds of
// concurrent operations with random SIGKILLs, then "loses power": the arena (tmpfs) is gone and
// a random half of the records written by killed operations is dropped from the journal. The
// rebuilt state must hold every acknowledged allocation at the address that was printed, and
// never give one address to two attachments.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "shm/format.h"
#include "tests/support/kill_round.h"
#include "tests/support/op_timing.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;

json addresses_of(const ProcessResult& r) {
    json out = json::array();
    const json doc = r.json();  // keep it alive: the loop refers into it
    for (const auto& ip : doc["ips"]) {
        std::string a = ip["address"];
        out.push_back(a.substr(0, a.find('/')));
    }
    return out;
}

// Zeroes a random half of the journal records whose container id is in `uncertain`.
size_t drop_records(const std::string& journal_dir, const std::set<std::string>& uncertain,
                    std::mt19937& rng) {
    size_t dropped = 0;
    for (const auto& f : std::filesystem::directory_iterator(journal_dir)) {
        if (f.path().filename().string().rfind(format::kJournalPrefix, 0) != 0) continue;
        int fd = ::open(f.path().c_str(), O_RDWR);
        format::JournalRecord r{};
        for (off_t off = 0; ::pread(fd, &r, sizeof r, off) == ssize_t(sizeof r); off += sizeof r) {
            const std::string cid(r.container_id, strnlen(r.container_id, sizeof r.container_id));
            if (r.op == 0 || uncertain.count(cid) == 0 || rng() % 2 == 0) continue;
            const format::JournalRecord zero{};
            ::pwrite(fd, &zero, sizeof zero, off);
            ++dropped;
        }
        ::close(fd);
    }
    return dropped;
}

TEST(PowerLoss, AcknowledgedStateSurvivesLosingAnyUnacknowledgedRecords) {
    TempDir dir;
    json cfg = make_config(dir.path(), "pl", "1.1.0");
    cfg["ipam"]["ranges"] =
        json::parse(R"([[{"subnet":"10.70.0.0/23"}],[{"subnet":"fd70::/118"}]])");
    cfg["ipam"]["durability"] = "fsync";
    const std::string config = cfg.dump();
    const unsigned seed = unsigned(std::random_device{}());
    std::mt19937 rng(seed);
    SCOPED_TRACE("seed " + std::to_string(seed));

    // Kills land up to two ADD times after a spawn: inside the operation on any machine.
    const auto window = median_add_time(cfg) * 2;

    std::map<std::string, json> acked;  // attachment -> the addresses its ADD printed
    std::set<std::string> uncertain;    // attachments whose last ADD or DEL was killed
    int next = 0;
    for (int round = 0; round < 5; ++round) {
        std::vector<std::string> live;
        for (const auto& [id, a] : acked) live.push_back(id);
        const auto ops = mixed_ops(live, 80, "p", next, rng);
        const auto results = run_kill_round(
            ops, config, {}, [](size_t i) { return i % 3 == 0; }, window, rng);
        for (size_t i = 0; i < ops.size(); ++i) {
            const RoundOp& op = ops[i];
            const ProcessResult& r = results[i];
            if (r.signal != 0) {
                uncertain.insert(op.id);
                if (op.cmd == "DEL") acked.erase(op.id);
                continue;
            }
            ASSERT_EQ(r.exit_code, 0) << r.out;
            uncertain.erase(op.id);
            if (op.cmd == "ADD") acked[op.id] = addresses_of(r);
            if (op.cmd == "DEL") acked.erase(op.id);
        }
    }

    ASSERT_FALSE(uncertain.empty()) << "no kill landed inside an operation";

    // Power loss: the arena is gone, and so are some records of unacknowledged operations.
    std::filesystem::remove_all(dir.sub("run"));
    const size_t dropped = drop_records(dir.sub("data/pl"), uncertain, rng);
    std::printf("[ power    ] %zu acknowledged attachments, %zu uncertain, %zu records dropped\n",
                acked.size(), uncertain.size(), dropped);

    ASSERT_EQ(run_plugin(cni_env("ADD", "after-power-loss"), config).exit_code, 0);
    auto verify = run_ctl({"--run-dir", dir.sub("run"), "verify", "pl"});
    EXPECT_EQ(verify.exit_code, 0) << verify.out;
    auto dump = run_ctl({"--run-dir", dir.sub("run"), "dump", "pl", "--json"});
    const json doc = dump.json();
    std::map<std::string, json> held;
    std::set<std::string> seen;
    for (const auto& a : doc["allocations"]) {
        if (a["state"] != "allocated") continue;
        EXPECT_TRUE(seen.insert(a["address"]).second) << "two owners: " << a.dump();
        held[a["containerID"]].push_back(a["address"]);
    }
    for (const auto& [id, addrs] : acked) {
        json sorted_have = held[id], sorted_want = addrs;
        std::sort(sorted_have.begin(), sorted_have.end());
        std::sort(sorted_want.begin(), sorted_want.end());
        EXPECT_EQ(sorted_have, sorted_want) << id << " lost or changed its addresses";
    }
    for (const auto& [id, addrs] : held) {
        EXPECT_TRUE(acked.count(id) || uncertain.count(id) || id == "after-power-loss")
            << id << " holds addresses nobody was given";
    }
    // The runtime DELs what it never heard back about; then all is consistent.
    for (const auto& id : uncertain) ASSERT_EQ(run_plugin(cni_env("DEL", id), config).exit_code, 0);
    EXPECT_EQ(run_ctl({"--run-dir", dir.sub("run"), "verify", "pl"}).exit_code, 0);
}

TEST(Reboot, ManyProcessesStartingAtOnceRebuildOnceAndReclaim) {
    TempDir dir;
    write_file(dir.sub("boot_id"), "aaaaaaaa-0000-0000-0000-000000000001\n");
    json cfg = make_config(dir.path(), "rb", "1.1.0", "10.71.0.0/24");
    cfg["ipam"]["bootIdFile"] = dir.sub("boot_id");
    cfg["ipam"]["reuseDelay"] = 30;
    const std::string config = cfg.dump();
    for (int i = 0; i < 120; ++i) {
        ASSERT_EQ(run_plugin(cni_env("ADD", "before" + std::to_string(i)), config).exit_code, 0);
    }
    ASSERT_EQ(run_plugin(cni_env("DEL", "before0"), config).exit_code, 0);  // cooling: kept

    // Reboot: tmpfs empty, a new boot id; 200 pods start at once.
    std::filesystem::remove_all(dir.sub("run"));
    write_file(dir.sub("boot_id"), "bbbbbbbb-0000-0000-0000-000000000002\n");
    std::vector<std::unique_ptr<Child>> kids;
    for (int i = 0; i < 200; ++i) {
        kids.push_back(std::make_unique<Child>(std::vector<std::string>{SHMIPAM_PLUGIN_PATH},
                                               cni_env("ADD", "after" + std::to_string(i)),
                                               config));
    }
    std::set<std::string> addrs;
    for (auto& k : kids) {
        auto r = k->wait();
        ASSERT_EQ(r.exit_code, 0) << r.out;
        EXPECT_TRUE(addrs.insert(r.json()["ips"][0]["address"]).second);
    }
    EXPECT_EQ(addrs.count("10.71.0.2/24"), 0u) << "released 0 s before the reboot: still cooling";
    auto verify = run_ctl({"--run-dir", dir.sub("run"), "verify", "rb"});
    EXPECT_EQ(verify.exit_code, 0) << verify.out;
    auto dump = run_ctl({"--run-dir", dir.sub("run"), "dump", "rb", "--json"});
    const json doc = dump.json();
    size_t before = 0;
    for (const auto& a : doc["allocations"]) {
        if (a.value("containerID", "").rfind("before", 0) == 0) ++before;
    }
    EXPECT_EQ(before, 0u) << "pre-reboot sandboxes hold nothing after the reboot";
    auto stats = run_ctl({"--run-dir", dir.sub("run"), "stats", "rb", "--json"});
    EXPECT_EQ(stats.json()["rebootReclaims"], 119) << stats.out;
}

TEST(Reboot, ARunDirectoryThatSurvivesARebootIsRetiredAndRebuilt) {
    // runDir on disk, not tmpfs: the arena outlives the reboot, but its sandboxes do not.
    TempDir dir;
    write_file(dir.sub("boot_id"), "aaaaaaaa-0000-0000-0000-000000000001\n");
    json cfg = make_config(dir.path(), "persist", "1.1.0", "10.72.0.0/24");
    cfg["ipam"]["bootIdFile"] = dir.sub("boot_id");
    cfg["ipam"]["reclaimOnReboot"] = true;
    const std::string config = cfg.dump();
    ASSERT_EQ(run_plugin(cni_env("ADD", "old"), config).exit_code, 0);
    write_file(dir.sub("boot_id"), "bbbbbbbb-0000-0000-0000-000000000002\n");
    auto r = run_plugin(cni_env("ADD", "new"), config);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.json()["ips"][0]["address"], "10.72.0.2/24") << "the old sandbox's address is free";
    auto check = run_plugin(cni_env("CHECK", "old"), config);
    EXPECT_EQ(check.json()["code"], 110) << check.out;
    EXPECT_EQ(run_ctl({"--run-dir", dir.sub("run"), "verify", "persist"}).exit_code, 0);
}

}  // namespace
}  // namespace shmipam::testing
