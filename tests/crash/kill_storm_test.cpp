// Storms: rounds of several hundred concurrent ADD and DEL processes, a third of them SIGKILLed
// at random moments. After each round the test does what a runtime does (DEL every attachment
// whose ADD or DEL did not succeed); then verify must be clean and the network must hold exactly
// the attachments whose ADD succeeded, each with its own address. At the end, everything is
// released and filling the network gives exactly its usable addresses: not one leaked.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;

// Exactly the attachments in `live` hold addresses: one per range set each, all distinct.
void expect_exactly_held(const TempDir& dir, const std::string& network, size_t range_sets,
                         const std::set<std::string>& live, const std::string& when) {
    auto dump = run_ctl({"--run-dir", dir.sub("run"), "dump", network, "--json"});
    const json doc = dump.json();
    std::map<std::string, size_t> held;
    std::set<std::string> addrs;
    for (const auto& a : doc["allocations"]) {
        if (a["state"] != "allocated") continue;
        ++held[a["containerID"].get<std::string>()];
        EXPECT_TRUE(addrs.insert(a["address"]).second) << "duplicate " << a.dump();
    }
    std::set<std::string> holders;
    for (const auto& [id, n] : held) {
        holders.insert(id);
        EXPECT_EQ(n, range_sets) << id << " " << when;
    }
    ASSERT_EQ(holders, live) << when;
}

struct StormCounts {
    int kills = 0, killed_adds = 0, killed_dels = 0;
};

// Rounds of kPerRound concurrent ADDs and DELs, a third SIGKILLed at random moments; after each
// round the runtime's DELs, then verify, and exactly `live` hold addresses (one per range set,
// all distinct).
void storm_rounds(const TempDir& dir, const std::string& network, const std::string& config,
                  size_t range_sets, int rounds, int per_round, std::mt19937& rng,
                  std::set<std::string>& live, StormCounts& counts) {
    auto env_for = [](const std::string& cmd, const std::string& id, int round) {
        auto env = cni_env(cmd, id);
        // Odd rounds widen every step of claims and releases (a sleep at each fault point), so
        // that random kills land inside them; even rounds run at full speed.
        if (round % 2 == 1) env["SHMIPAM_FAULT_STRETCH_US"] = "300";
        return env;
    };
    static int next_id = 0;
    for (int round = 0; round < rounds; ++round) {
        struct Op {
            std::string cmd, id;
            std::unique_ptr<Child> child;
            bool killed = false;
        };
        std::vector<Op> ops;
        std::vector<std::string> live_list(live.begin(), live.end());
        std::shuffle(live_list.begin(), live_list.end(), rng);
        for (int i = 0; i < per_round; ++i) {
            // Half DELs of live attachments (while there are), the rest ADDs of new ones.
            if (i % 2 == 1 && !live_list.empty()) {
                ops.push_back({"DEL", live_list.back(), nullptr});
                live_list.pop_back();
            } else {
                ops.push_back({"ADD", "s" + std::to_string(next_id++), nullptr});
            }
        }
        // A third of them are SIGKILLed, each at a random moment up to 1.5 ms after its own
        // spawn (an ADD or DEL takes about 1 ms here, longer under this load), by a killer
        // thread that runs while the rest are still being spawned.
        std::vector<std::atomic<pid_t>> pids(ops.size());
        std::vector<std::chrono::steady_clock::time_point> spawned(ops.size());
        std::vector<int> delay_us(ops.size(), -1);
        for (size_t i = 0; i < ops.size(); ++i) {
            if (rng() % 3 == 0) delay_us[i] = int(rng() % (round % 2 == 1 ? 6000 : 1500));
        }
        std::thread killer([&] {
            for (size_t i = 0; i < ops.size(); ++i) {
                if (delay_us[i] < 0) continue;
                while (pids[i].load() == 0) std::this_thread::yield();
                std::this_thread::sleep_until(spawned[i] + std::chrono::microseconds(delay_us[i]));
                ::kill(pids[i].load(), SIGKILL);
            }
        });
        for (size_t i = 0; i < ops.size(); ++i) {
            spawned[i] = std::chrono::steady_clock::now();
            ops[i].child = std::make_unique<Child>(std::vector<std::string>{SHMIPAM_PLUGIN_PATH},
                                                   env_for(ops[i].cmd, ops[i].id, round), config);
            pids[i].store(ops[i].child->pid());
        }
        killer.join();
        std::vector<std::string> retry_del;
        for (auto& op : ops) {
            ProcessResult r = op.child->wait();
            if (r.signal == SIGKILL) {
                ++counts.kills;
                (op.cmd == "ADD" ? counts.killed_adds : counts.killed_dels)++;
                retry_del.push_back(op.id);  // a runtime DELs after a failed ADD or DEL
                continue;
            }
            ASSERT_EQ(r.exit_code, 0) << op.cmd << " " << op.id << ": " << r.out;
            if (op.cmd == "ADD") live.insert(op.id);
            if (op.cmd == "DEL") live.erase(op.id);
        }
        for (const auto& id : retry_del) {
            auto r = run_plugin(cni_env("DEL", id), config);
            ASSERT_EQ(r.exit_code, 0) << r.out;
            live.erase(id);
        }
        auto verify = run_ctl({"--run-dir", dir.sub("run"), "verify", network});
        ASSERT_EQ(verify.exit_code, 0) << "round " << round << ": " << verify.out;
        expect_exactly_held(dir, network, range_sets, live, "round " + std::to_string(round));
    }
}

TEST(KillStorm, RandomSigkillsNeverDuplicateLeakOrStick) {
    TempDir dir;
    json cfg = make_config(dir.path(), "storm", "1.1.0", "10.50.0.0/22");  // 1021 usable
    const std::string config = cfg.dump();
    constexpr int kRounds = 8;
    constexpr int kPerRound = 300;
    const unsigned seed = unsigned(std::random_device{}());
    std::mt19937 rng(seed);
    SCOPED_TRACE("seed " + std::to_string(seed));

    std::set<std::string> live;  // attachments whose ADD succeeded and were not DELeted
    StormCounts counts;
    storm_rounds(dir, "storm", config, 1, kRounds, kPerRound, rng, live, counts);
    if (HasFatalFailure()) return;
    const int kills = counts.kills, killed_adds = counts.killed_adds,
              killed_dels = counts.killed_dels;
    // How many kills landed while a lease was held (mid-claim or mid-release) and were healed.
    const json counters =
        run_ctl({"--run-dir", dir.sub("run"), "dump", "storm", "--json"}).json()["counters"];
    std::printf(
        "[ storm    ] %d rounds x %d processes, %d SIGKILLs (%d ADDs, %d DELs), %d caught holding "
        "a lease and healed, seed %u\n",
        kRounds, kPerRound, kills, killed_adds, killed_dels,
        counters["deadLeasesReaped"].get<int>(), seed);
    EXPECT_GT(kills, kRounds * kPerRound / 5);

    // The operator's view after the storm: every verb reads the state the kills left.
    const std::string rd = dir.sub("run");
    const json ls = run_ctl({"--run-dir", rd, "ls", "--json"}).json();
    ASSERT_EQ(ls.size(), 1u);
    EXPECT_EQ(ls[0]["inUse"].get<size_t>(), live.size());
    const json stats = run_ctl({"--run-dir", rd, "stats", "storm", "--json"}).json();
    EXPECT_GT(stats["deadLeasesReaped"].get<int>(), 0);
    EXPECT_EQ(stats["leasesHeld"], 0);
    EXPECT_EQ(run_ctl({"--run-dir", rd, "metrics"}).exit_code, 0);
    EXPECT_NE(run_ctl({"--run-dir", rd, "render", "storm"}).out.find("</svg>"), std::string::npos);
    EXPECT_EQ(run_ctl({"--run-dir", rd, "repair", "storm"}).out, "nothing to repair\n");

    // Release everything, then fill: exactly the usable addresses, 0 leaked.
    for (const auto& id : live) ASSERT_EQ(run_plugin(cni_env("DEL", id), config).exit_code, 0);
    json fill = cfg;
    fill["ipam"]["reuseDelay"] = 0;
    const std::string fill_config = fill.dump();
    int added = 0;
    for (int i = 0; i < 1100; ++i) {
        auto r = run_plugin(cni_env("ADD", "fill" + std::to_string(i)), fill_config);
        if (r.exit_code != 0) {
            EXPECT_EQ(r.json()["code"], 100) << r.out;
            break;
        }
        ++added;
    }
    EXPECT_EQ(added, 1021);
    EXPECT_EQ(run_ctl({"--run-dir", dir.sub("run"), "verify", "storm"}).exit_code, 0);
}

// Four range sets (4 journal records per ADD or DEL) and journalMaxSegments 1: the journal is
// compacted several times during the storm, by whichever invocation reaches a segment's check, killed or
// not. Then the arena is lost: the rebuild from checkpoint and segments holds exactly the live
// attachments (nothing compacted away that an answered ADD or DEL had made durable).
TEST(KillStorm, CompactionUnderSigkillsLosesNothing) {
    TempDir dir;
    json cfg = make_config(dir.path(), "cstorm", "1.1.0");
    cfg["ipam"]["ranges"] = json::parse(
        R"([[{"subnet":"10.51.0.0/22"}],[{"subnet":"10.52.0.0/22"}],[{"subnet":"10.53.0.0/22"}],)"
        R"([{"subnet":"fd53::/118"}]])");
    cfg["ipam"]["journalMaxSegments"] = 1;
    const std::string config = cfg.dump();
    const unsigned seed = unsigned(std::random_device{}());
    std::mt19937 rng(seed);
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::set<std::string> live;
    StormCounts counts;
    storm_rounds(dir, "cstorm", config, 4, 8, 300, rng, live, counts);
    if (HasFatalFailure()) return;

    int checkpoints = 0;
    for (const auto& f : std::filesystem::directory_iterator(dir.sub("data/cstorm"))) {
        checkpoints += f.path().filename().string().rfind("shmipam-checkpoint.", 0) == 0;
    }
    EXPECT_GE(checkpoints, 1) << "no compaction ran";
    std::printf("[ storm    ] with compaction: %d SIGKILLs, %zu live\n", counts.kills, live.size());

    std::filesystem::remove_all(dir.sub("run"));
    ASSERT_EQ(run_plugin(cni_env("ADD", "after"), config).exit_code, 0);
    live.insert("after");
    EXPECT_EQ(run_ctl({"--run-dir", dir.sub("run"), "verify", "cstorm"}).exit_code, 0);
    expect_exactly_held(dir, "cstorm", 4, live, "after the rebuild");
}

}  // namespace
}  // namespace shmipam::testing
