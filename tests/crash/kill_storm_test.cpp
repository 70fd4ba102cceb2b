// Storms: rounds of several hundred concurrent ADD and DEL processes, a third of them SIGKILLed
// at random moments. After each round the test does what a runtime does (DEL every attachment
// whose ADD or DEL did not succeed); then verify must be clean and the network must hold exactly
// the attachments whose ADD succeeded, each with its own address. At the end, everything is
// released and filling the network gives exactly its usable addresses: not one leaked.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "base/fault_point.h"
#include "tests/support/kill_round.h"
#include "tests/support/op_timing.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;

// Exactly the attachments in `live` hold addresses: one per range set each, all distinct, over
// all of `networks` (pool mode: the states of the pools an ADD may fall through).
void expect_exactly_held(const TempDir& dir, const std::vector<std::string>& networks,
                         size_t range_sets, const std::set<std::string>& live,
                         const std::string& when) {
    std::map<std::string, size_t> held;
    std::set<std::string> addrs;
    for (const auto& network : networks) {
        auto dump = run_ctl({"--run-dir", dir.sub("run"), "dump", network, "--json"});
        const json doc = dump.json();
        for (const auto& a : doc["allocations"]) {
            if (a["state"] != "allocated") continue;
            ++held[a["containerID"].get<std::string>()];
            EXPECT_TRUE(addrs.insert(a["address"]).second) << "duplicate " << a.dump();
        }
    }
    std::set<std::string> holders;
    for (const auto& [id, n] : held) {
        holders.insert(id);
        EXPECT_EQ(n, range_sets) << id << " " << when;
    }
    ASSERT_EQ(holders, live) << when;
}

// The environment that makes a plugin process SIGKILL itself at a random step of `cmd` taken
// while it holds its lease (base/fault_point.h).
std::map<std::string, std::string> die_inside_lease(const std::string& cmd, std::mt19937& rng) {
    static const std::vector<std::string> add_points = {
        "lease.after_cas",      "add.after_entry_claim", "add.after_fingerprint",
        "add.after_slot_claim", "add.after_publish",     "add.before_commit",
        "add.after_commit",     "journal.after_intent",  "journal.after_reserve",
        "journal.after_sync"};
    static const std::vector<std::string> del_points = {
        "lease.after_cas",          "del.after_target",       "del.after_entry_release",
        "del.after_slot_releasing", "del.after_slot_cooling", "del.after_release",
        "journal.after_intent",     "journal.after_sync"};
    const auto& points = cmd == "ADD" ? add_points : del_points;
    return {{"SHMIPAM_FAULT", points[rng() % points.size()]}, {"SHMIPAM_FAULT_MODE", "kill"}};
}

struct StormCounts {
    int rounds = 0, kills = 0, killed_adds = 0, killed_dels = 0;
};

// How long the storm goes on: at least min_rounds, then until `reached()` says the state it is
// meant to reach was reached (how many rounds that takes depends on the machine's speed), at
// most max_rounds.
struct StormLength {
    int min_rounds, max_rounds;
    std::function<bool()> reached;
};

// Rounds of per_round concurrent ADDs and DELs, a third SIGKILLed at random moments; after each
// round the runtime's DELs, then verify, and exactly `live` hold addresses (one per range set,
// all distinct).
void storm_rounds(const TempDir& dir, const std::vector<std::string>& networks, const json& cfg,
                  size_t range_sets, const StormLength& length, int per_round, std::mt19937& rng,
                  std::set<std::string>& live, StormCounts& counts) {
    const std::string config = cfg.dump();
    // Odd rounds widen every step of claims and releases (a sleep at each fault point), so that
    // random kills land inside them; even rounds run at full speed.
    const std::map<std::string, std::string> stretched{{"SHMIPAM_FAULT_STRETCH_US", "300"}};
    // Each kill lands at a random moment up to 1.5 ADD times (of that round's kind) after its
    // process was spawned: inside the operation whatever the machine's speed.
    const std::chrono::microseconds window[2] = {median_add_time(cfg) * 3 / 2,
                                                 median_add_time(cfg, stretched) * 3 / 2};
    std::printf("[ storm    ] kill windows %.2f ms, %.2f ms stretched\n",
                double(window[0].count()) / 1000, double(window[1].count()) / 1000);
    static int next_id = 0;
    for (int round = 0; round < length.max_rounds; ++round) {
        if (round >= length.min_rounds && length.reached()) break;
        counts.rounds = round + 1;
        std::vector<RoundOp> ops;
        std::vector<std::string> live_list(live.begin(), live.end());
        std::shuffle(live_list.begin(), live_list.end(), rng);
        for (int i = 0; i < per_round; ++i) {
            // Half DELs of live attachments (while there are), the rest ADDs of new ones.
            if (i % 2 == 1 && !live_list.empty()) {
                ops.push_back({"DEL", live_list.back()});
                live_list.pop_back();
            } else {
                ops.push_back({"ADD", "s" + std::to_string(next_id++)});
            }
        }
        // A third of them are SIGKILLed: most by the killer at a random moment, one in eight of
        // those at a random step inside its lease (a fault point armed to SIGKILL there). Whether
        // a timed kill lands inside a lease depends on how the machine schedules 300 processes
        // on its cores; the armed ones make sure dead lease holders are healed in every round.
        std::vector<bool> kill(ops.size());
        for (size_t i = 0; i < ops.size(); ++i) {
            if (rng() % 3 != 0) continue;
            if (rng() % 8 == 0) {
                ops[i].env = die_inside_lease(ops[i].cmd, rng);
            } else {
                kill[i] = true;
            }
        }
        const auto results = run_kill_round(
            ops, config, round % 2 == 1 ? stretched : decltype(stretched){},
            [&](size_t i) { return bool(kill[i]); }, window[round % 2], rng);
        std::vector<std::string> retry_del;
        for (size_t i = 0; i < ops.size(); ++i) {
            const RoundOp& op = ops[i];
            const ProcessResult& r = results[i];
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
        for (const auto& network : networks) {
            auto verify = run_ctl({"--run-dir", dir.sub("run"), "verify", network});
            ASSERT_EQ(verify.exit_code, 0)
                << "round " << round << " " << network << ": " << verify.out;
        }
        expect_exactly_held(dir, networks, range_sets, live, "round " + std::to_string(round));
    }
}

TEST(KillStorm, RandomSigkillsNeverDuplicateLeakOrStick) {
    TempDir dir;
    const json cfg = make_config(dir.path(), "storm", "1.1.0", "10.50.0.0/22");  // 1021 usable
    const std::string config = cfg.dump();
    constexpr int kPerRound = 300;
    const unsigned seed = unsigned(std::random_device{}());
    std::mt19937 rng(seed);
    SCOPED_TRACE("seed " + std::to_string(seed));

    // What the storm must reach: kills on a fifth of 8 rounds' operations, and at least one
    // landing while its process held a lease (mid-claim or mid-release), healed by another.
    constexpr int kMinKills = 8 * kPerRound / 5;
    auto reaped = [&] {
        const json counters =
            run_ctl({"--run-dir", dir.sub("run"), "dump", "storm", "--json"}).json()["counters"];
        return counters["deadLeasesReaped"].get<int>();
    };
    std::set<std::string> live;  // attachments whose ADD succeeded and were not DELeted
    StormCounts counts;
    storm_rounds(dir, {"storm"}, cfg, 1,
                 {8, 24, [&] { return counts.kills >= kMinKills && reaped() > 0; }}, kPerRound, rng,
                 live, counts);
    if (HasFatalFailure()) return;
    std::printf(
        "[ storm    ] %d rounds x %d processes, %d SIGKILLs (%d ADDs, %d DELs), %d caught holding "
        "a lease and healed, seed %u\n",
        counts.rounds, kPerRound, counts.kills, counts.killed_adds, counts.killed_dels, reaped(),
        seed);
    EXPECT_GE(counts.kills, kMinKills);

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
// compacted several times during the storm, by whichever invocation reaches a segment's check,
// killed or not. Then the arena is lost: the rebuild from checkpoint and segments holds exactly the
// live attachments (nothing compacted away that an answered ADD or DEL had made durable).
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
    auto checkpoints = [&] {
        int n = 0;
        for (const auto& f : std::filesystem::directory_iterator(dir.sub("data/cstorm"))) {
            n += f.path().filename().string().rfind("shmipam-checkpoint.", 0) == 0;
        }
        return n;
    };
    std::set<std::string> live;
    StormCounts counts;
    // At least 8 rounds, and on until the journal has been compacted (how many rounds that takes
    // depends on how many operations the kills cut short).
    storm_rounds(dir, {"cstorm"}, cfg, 4, {8, 30, [&] { return checkpoints() > 0; }}, 300, rng,
                 live, counts);
    if (HasFatalFailure()) return;
    ASSERT_GE(checkpoints(), 1) << "no compaction ran in " << counts.rounds << " rounds";
    std::printf("[ storm    ] with compaction: %d rounds, %d SIGKILLs, %zu live\n", counts.rounds,
                counts.kills, live.size());

    std::filesystem::remove_all(dir.sub("run"));
    ASSERT_EQ(run_plugin(cni_env("ADD", "after"), config).exit_code, 0);
    live.insert("after");
    EXPECT_EQ(run_ctl({"--run-dir", dir.sub("run"), "verify", "cstorm"}).exit_code, 0);
    expect_exactly_held(dir, {"cstorm"}, 4, live, "after the rebuild");
}

// Pool mode under the same storm: ADDs select two pools by annotation and fall through from the
// small one to the big one while DELs, kills and the runtime's DELs come and go; every round both
// pool states verify clean and hold exactly the live attachments between them.
TEST(KillStorm, PoolModeSigkillsNeverDuplicateLeakOrStick) {
    TempDir dir;
    std::filesystem::create_directories(dir.sub("pools"));
    write_file(dir.sub("pools") + "/pools.yaml", R"(apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderIPPool
metadata: {name: first}
spec: {subnet: 10.60.0.0/24, ips: ["10.60.0.10-10.60.0.73"], gateway: 10.60.0.1}
---
apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderIPPool
metadata: {name: second}
spec: {subnet: 10.61.0.0/22, ips: ["10.61.0.10-10.61.3.200"], gateway: 10.61.0.1}
)");
    json cfg = make_config(dir.path(), "poolstorm", "1.1.0");
    cfg["ipam"].erase("ranges");
    cfg["ipam"]["poolsDir"] = dir.sub("pools");
    cfg["ipam"]["nodeName"] = "node-a";
    cfg["runtimeConfig"]["io.kubernetes.cri.pod-annotations"] = {
        {"ipam.spidernet.io/ippool", R"({"ipv4": ["first", "second"]})"}};
    const unsigned seed = unsigned(std::random_device{}());
    std::mt19937 rng(seed);
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<std::string> states = {"pool/first", "pool/second"};
    auto reaped = [&] {
        int n = 0;
        for (const auto& s : states) {
            const json d = run_ctl({"--run-dir", dir.sub("run"), "dump", s, "--json"}).json();
            if (d.contains("counters")) n += d["counters"]["deadLeasesReaped"].get<int>();
        }
        return n;
    };
    constexpr int kPerRound = 200;
    std::set<std::string> live;
    StormCounts counts;
    storm_rounds(dir, states, cfg, 1,
                 {6, 20, [&] { return counts.kills >= 6 * kPerRound / 5 && reaped() > 0; }},
                 kPerRound, rng, live, counts);
    if (HasFatalFailure()) return;
    std::printf(
        "[ storm    ] pool mode: %d rounds x %d processes, %d SIGKILLs, %d healed, %zu live\n",
        counts.rounds, kPerRound, counts.kills, reaped(), live.size());
    EXPECT_GT(reaped(), 0);
    // The small pool filled up and ADDs fell through to the big one.
    const json second =
        run_ctl({"--run-dir", dir.sub("run"), "dump", "pool/second", "--json"}).json();
    EXPECT_FALSE(second["allocations"].empty());
}

// Sticky pods mixed into the storm: 16 StatefulSet pods restart (a new sandbox, sometimes
// before the old one's DEL, which then comes late), stop and start again while ordinary pods
// come and go, a third of every operation SIGKILLed. Every round: verify is clean, no address is
// held twice, ordinary pods hold exactly what their answered ADDs gave them, and every sticky
// pod that was ever answered keeps the address it was first answered. Then a reboot (a new boot
// id, the run directory gone): ordinary allocations are reclaimed, every claim is kept, and each
// pod's next sandbox gets its address back.
TEST(KillStorm, StickyPodsKeepTheirAddressesThroughKillsAndAReboot) {
    TempDir dir;
    write_file(dir.sub("boot_id"), "11111111-2222-3333-4444-555555555555\n");
    json cfg = make_config(dir.path(), "sticky", "1.1.0", "10.54.0.0/24");
    cfg["ipam"]["bootIdFile"] = dir.sub("boot_id");
    const std::string config = cfg.dump();
    constexpr int kNames = 16;
    std::vector<std::string> sticky_config(kNames);
    for (int n = 0; n < kNames; ++n) {
        json c = cfg;
        c["runtimeConfig"]["io.kubernetes.cri.pod-annotations"] = {
            {"ipam.shmipam.io/static-ip", "true"}};
        c["args"]["cni"]["labels"] = json::array({{{"key", "statefulset.kubernetes.io/pod-name"},
                                                   {"value", "db-" + std::to_string(n)}}});
        sticky_config[n] = c.dump();
    }
    auto sticky_args = [](int n) {
        return std::map<std::string, std::string>{
            {"CNI_ARGS", "K8S_POD_NAMESPACE=shop;K8S_POD_NAME=db-" + std::to_string(n)}};
    };
    const unsigned seed = unsigned(std::random_device{}());
    std::mt19937 rng(seed);
    SCOPED_TRACE("seed " + std::to_string(seed));
    // Odd rounds widen every step (a sleep at each fault point) so that kills land inside claims,
    // binds and releases; even rounds run at full speed.
    const std::map<std::string, std::string> stretched{{"SHMIPAM_FAULT_STRETCH_US", "300"}};
    const std::chrono::microseconds window[2] = {median_add_time(cfg) * 3 / 2,
                                                 median_add_time(cfg, stretched) * 3 / 2};

    std::set<std::string> live;                     // ordinary attachments answered, not DELed
    std::map<int, std::vector<std::string>> boxes;  // sticky name -> sandboxes not yet DELed
    std::map<int, std::string> address;             // sticky name -> the address first answered
    int next_id = 0, kills = 0;
    for (int round = 0; round < 10; ++round) {
        std::vector<RoundOp> ops;
        std::vector<int> name_of;  // -1 ordinary
        std::vector<std::string> live_list(live.begin(), live.end());
        std::shuffle(live_list.begin(), live_list.end(), rng);
        for (int i = 0; i < 60; ++i) {
            if (i % 2 == 1 && !live_list.empty()) {
                ops.push_back({"DEL", live_list.back()});
                live_list.pop_back();
            } else {
                ops.push_back({"ADD", "s" + std::to_string(next_id++)});
            }
            name_of.push_back(-1);
        }
        for (int n = 0; n < kNames; ++n) {
            // Stop (DEL the newest sandbox), or start a new sandbox: a restart, with or without
            // the old one's DEL first.
            if (!boxes[n].empty() && rng() % 2 == 0) {
                ops.push_back({"DEL", boxes[n].back(), sticky_args(n), sticky_config[n]});
            } else {
                const std::string id = "db" + std::to_string(n) + "-" + std::to_string(next_id++);
                ops.push_back({"ADD", id, sticky_args(n), sticky_config[n]});
            }
            name_of.push_back(n);
        }
        // A third are SIGKILLed; one in four of a sticky pod's at a claim step of its own (a
        // fault point armed to SIGKILL there), the rest at random moments.
        std::vector<bool> kill(ops.size());
        for (size_t i = 0; i < ops.size(); ++i) {
            if (rng() % 3 != 0) continue;
            if (name_of[i] >= 0 && rng() % 4 == 0) {
                const auto& points = faults::kClaimPoints;
                const size_t count = std::size(points) - (ops[i].cmd == "ADD" ? 1 : 0);
                const std::string_view p =
                    ops[i].cmd == "ADD" ? points[rng() % count] : points[std::size(points) - 1];
                ops[i].env["SHMIPAM_FAULT"] = std::string(p);
                ops[i].env["SHMIPAM_FAULT_MODE"] = "kill";
            } else {
                kill[i] = true;
            }
        }
        const auto results = run_kill_round(
            ops, config, round % 2 == 1 ? stretched : decltype(stretched){},
            [&](size_t i) { return bool(kill[i]); }, window[round % 2], rng);
        std::vector<RoundOp> retry_del;
        for (size_t i = 0; i < ops.size(); ++i) {
            const RoundOp& op = ops[i];
            const ProcessResult& r = results[i];
            const int n = name_of[i];
            if (r.signal == SIGKILL) {
                ++kills;
                // A runtime DELs after a failed ADD or DEL.
                auto env = op.env;
                env.erase("SHMIPAM_FAULT");
                retry_del.push_back({"DEL", op.id, env, op.config});
                if (n >= 0 && op.cmd == "DEL") std::erase(boxes[n], op.id);
                continue;
            }
            ASSERT_EQ(r.exit_code, 0) << op.cmd << " " << op.id << ": " << r.out;
            if (n < 0) {
                if (op.cmd == "ADD") live.insert(op.id);
                if (op.cmd == "DEL") live.erase(op.id);
                continue;
            }
            if (op.cmd == "DEL") {
                std::erase(boxes[n], op.id);
                continue;
            }
            const std::string got = r.json()["ips"][0]["address"];
            if (!address.count(n)) address[n] = got;
            EXPECT_EQ(got, address[n]) << "db-" << n << " round " << round;
            boxes[n].push_back(op.id);
        }
        for (const RoundOp& d : retry_del) {
            auto r = run_plugin(
                [&] {
                    auto env = cni_env("DEL", d.id);
                    for (const auto& [k, v] : d.env) env[k] = v;
                    return env;
                }(),
                d.config.empty() ? config : d.config);
            ASSERT_EQ(r.exit_code, 0) << r.out;
            live.erase(d.id);
        }
        // The late DELs of sandboxes a newer one replaced.
        for (auto& [n, ids] : boxes) {
            while (ids.size() > 1) {
                auto env = cni_env("DEL", ids.front());
                for (const auto& [k, v] : sticky_args(n)) env[k] = v;
                ASSERT_EQ(run_plugin(env, sticky_config[n]).exit_code, 0);
                ids.erase(ids.begin());
            }
        }
        ASSERT_EQ(run_ctl({"--run-dir", dir.sub("run"), "verify", "sticky"}).exit_code, 0)
            << "round " << round << ": "
            << run_ctl({"--run-dir", dir.sub("run"), "verify", "sticky"}).out;
        const json d = run_ctl({"--run-dir", dir.sub("run"), "dump", "sticky", "--json"}).json();
        std::set<std::string> holders, addrs;
        for (const auto& a : d["allocations"]) {
            if (a["state"] != "allocated") continue;
            EXPECT_TRUE(addrs.insert(a["address"]).second) << "duplicate " << a;
            const std::string who = a["containerID"];
            if (who.rfind("sts:", 0) != 0) holders.insert(who);
        }
        ASSERT_EQ(holders, live) << "round " << round;
        const json claims =
            run_ctl({"--run-dir", dir.sub("run"), "claims", "sticky", "--json"}).json()["claims"];
        std::map<std::string, std::string> claimed;
        for (const auto& c : claims) claimed[c["name"]] = c["addresses"][0];
        for (const auto& [n, a] : address) {
            EXPECT_EQ(claimed["shop/db-" + std::to_string(n)] + "/24", a) << "round " << round;
        }
    }
    std::printf(
        "[ storm    ] sticky pods: 10 rounds, %d SIGKILLs, %zu ordinary live, %zu names "
        "answered, seed %u\n",
        kills, live.size(), address.size(), seed);
    ASSERT_GE(address.size(), size_t(kNames / 2));

    // A reboot: the run directory is gone (tmpfs), the boot id is new.
    std::filesystem::remove_all(dir.sub("run"));
    write_file(dir.sub("boot_id"), "99999999-2222-3333-4444-555555555555\n");
    ASSERT_EQ(run_plugin(cni_env("ADD", "after-reboot"), config).exit_code, 0);
    const json d = run_ctl({"--run-dir", dir.sub("run"), "dump", "sticky", "--json"}).json();
    for (const auto& a : d["allocations"]) {
        if (a["state"] != "allocated") continue;
        const std::string who = a["containerID"];
        EXPECT_TRUE(who == "after-reboot" || who.rfind("sts:", 0) == 0)
            << who << " survived the reboot";
    }
    for (const auto& [n, a] : address) {
        auto env = cni_env("ADD", "boot2-db" + std::to_string(n));
        for (const auto& [k, v] : sticky_args(n)) env[k] = v;
        auto r = run_plugin(env, sticky_config[n]);
        ASSERT_EQ(r.exit_code, 0) << r.out;
        EXPECT_EQ(r.json()["ips"][0]["address"], a) << "db-" << n << " after the reboot";
    }
    EXPECT_EQ(run_ctl({"--run-dir", dir.sub("run"), "verify", "sticky"}).exit_code, 0);
}

}  // namespace
}  // namespace shmipam::testing
