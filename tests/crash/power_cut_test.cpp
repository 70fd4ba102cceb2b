// Power cuts at the storage level. Real plugin processes (test build) run rounds of concurrent
// ADDs and DELs with random SIGKILLs, the last round cut short by killing everything, while each
// traces every change it makes to the data directory through the file system the plugin under
// test installs (tests/support/tracing_file_system.h). Then, on copies of the data directory,
// several different power cuts drop random subsets of whatever was not yet durable: unsynced
// record writes, unsynced names of new segments and checkpoints, unsynced checkpoint contents,
// unsynced unlinks of compacted segments. The arena is gone (tmpfs). Each
// rebuilt state must hold every attachment whose ADD answered, at the addresses it printed, hold
// nothing whose DEL answered, and never give one address to two attachments.
#include "tests/support/power_cut.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "tests/support/kill_round.h"
#include "tests/support/op_timing.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;

json printed_addresses(const ProcessResult& r) {
    json out = json::array();
    const json doc = r.json();  // keep it alive: the loop refers into it
    for (const auto& ip : doc["ips"]) {
        std::string a = ip["address"];
        out.push_back(a.substr(0, a.find('/')));
    }
    std::sort(out.begin(), out.end());
    return out;
}

json network_config(const std::string& root, const std::string& data_dir,
                    const std::string& run_dir) {
    json cfg = make_config(root, "cut", "1.1.0");
    cfg["ipam"]["dataDir"] = data_dir;
    cfg["ipam"]["runDir"] = run_dir;
    // Four range sets (4 records per ADD or DEL) and journalMaxSegments 1: the run crosses
    // segments and compacts, so names, checkpoints and unlinks are all at stake.
    cfg["ipam"]["ranges"] = json::parse(
        R"([[{"subnet":"10.81.0.0/22"}],[{"subnet":"10.82.0.0/22"}],[{"subnet":"10.83.0.0/22"}],)"
        R"([{"subnet":"fd83::/118"}]])");
    cfg["ipam"]["journalMaxSegments"] = 1;
    cfg["ipam"]["durability"] = "fsync";
    return cfg;
}

size_t checkpoints_in(const std::string& dir) {
    size_t n = 0;
    for (const auto& f : std::filesystem::directory_iterator(dir)) {
        n += f.path().filename().string().rfind("shmipam-checkpoint.", 0) == 0;
    }
    return n;
}

TEST(PowerCut, EveryAnsweredOperationSurvivesAnyLossOfUnsyncedWrites) {
    TempDir dir;
    const std::string trace = dir.sub("storage.trace");
    const json cfg_json = network_config(dir.path(), dir.sub("data"), dir.sub("run"));
    const std::string config = cfg_json.dump();
    const unsigned seed = unsigned(std::random_device{}());
    std::mt19937 rng(seed);
    SCOPED_TRACE("seed " + std::to_string(seed));
    // Kills land up to 2.5 ADD times after a spawn: inside the operation on any machine.
    const auto add_time = median_add_time(cfg_json);
    const auto window = add_time * 5 / 2;

    std::map<std::string, json> acked;    // attachment -> the addresses its ADD printed
    std::map<std::string, json> printed;  // every ADD that answered, kept after its DEL
    std::set<std::string> del_answered;   // every DEL that answered
    std::set<std::string> uncertain;      // its last ADD or DEL never answered
    int next = 0, kills = 0, rounds = 0;
    // At least kMinRounds rounds, then more until the journal has been compacted (so that
    // segment names, checkpoints and unlinks are at stake: how many operations that takes
    // depends on how many the kills cut short), at most kMaxRounds; then one more round during
    // which the power goes: every process in it is killed.
    constexpr int kMinRounds = 5, kMaxRounds = 40;
    for (bool last = false; !HasFatalFailure(); ++rounds) {
        // What a runtime would DEL: attachments whose ADD answered, and those whose ADD or DEL
        // it never heard back from. Once many are live, half the operations are DELs, so the
        // range sets (1021 addresses each) never fill however many rounds the run takes.
        std::vector<std::string> live;
        for (const auto& [id, a] : acked) live.push_back(id);
        for (const auto& id : uncertain) {
            if (!acked.count(id)) live.push_back(id);
        }
        const auto ops = mixed_ops(live, 300, "c", next, rng, live.size() > 300 ? 2 : 3);
        const auto results = run_kill_round(
            ops, config, {{"SHMIPAM_STORAGE_TRACE", trace}},
            [&](size_t i) { return last || i % 4 == 0; }, window, rng);
        for (size_t i = 0; i < ops.size(); ++i) {
            const RoundOp& op = ops[i];
            const ProcessResult& r = results[i];
            if (r.signal != 0) {
                ++kills;
                uncertain.insert(op.id);
                if (op.cmd == "DEL") acked.erase(op.id);
                continue;
            }
            ASSERT_EQ(r.exit_code, 0) << r.out;
            uncertain.erase(op.id);
            if (op.cmd == "ADD") acked[op.id] = printed[op.id] = printed_addresses(r);
            if (op.cmd == "DEL") acked.erase(op.id);
            if (op.cmd == "DEL") del_answered.insert(op.id);
        }
        if (last) break;
        last = rounds + 1 >= kMaxRounds ||
               (rounds + 1 >= kMinRounds && checkpoints_in(dir.sub("data/cut")) > 0);
    }
    if (HasFatalFailure()) return;
    std::printf("[ power cut] %d rounds of 300 (ADD %.2f ms, kill window %.2f ms), %d SIGKILLs\n",
                rounds + 1, double(add_time.count()) / 1000, double(window.count()) / 1000, kills);
    ASSERT_GE(checkpoints_in(dir.sub("data/cut")), 1u)
        << "the run never compacted in " << kMaxRounds << " rounds: unlinks were not at stake";

    // Power cuts: at the end of the run, at random points, and right after a file appeared or
    // a record was written (before anyone synced it), where the most is at stake.
    const std::vector<TraceEvent> events = read_trace(trace);
    ASSERT_GT(events.size(), 1000u);
    auto right_after = [&](char kind) {
        std::vector<size_t> at;
        for (size_t i = 0; i < events.size(); ++i) {
            if (events[i].kind == kind) at.push_back(i + 1);
        }
        return at.empty() ? events.size() : at[rng() % at.size()];
    };
    for (int n = 0; n < 9; ++n) {
        const size_t cut = n == 0  ? events.size()
                           : n < 4 ? size_t(rng() % events.size())
                           : n < 6 ? right_after('C')
                                   : right_after('W');
        SCOPED_TRACE("power cut at event " + std::to_string(cut) + " of " +
                     std::to_string(events.size()));
        const std::string data = dir.sub("data-cut" + std::to_string(n));
        const std::string run = dir.sub("run-cut" + std::to_string(n));
        std::filesystem::copy(dir.sub("data"), data, std::filesystem::copy_options::recursive);
        const PowerCut pc = cut_power(events, cut, dir.sub("data"), data, rng);
        const KnownAtCut known = known_at(events, cut);
        std::printf(
            "[ power cut] at %zu/%zu: took back %zu later changes; dropped %zu unsynced writes, "
            "%zu names, %zu contents; undid %zu unlinks; %zu certain, %zu uncertain\n",
            cut, events.size(), pc.undone, pc.writes_dropped, pc.names_lost, pc.contents_lost,
            pc.unlinks_undone, known.answered.size(), known.uncertain.size());

        // Back up with an empty run directory: the first invocation rebuilds from the journal.
        const std::string cfg = network_config(dir.path(), data, run).dump();
        auto after = run_plugin(cni_env("ADD", "after-cut"), cfg);
        ASSERT_EQ(after.exit_code, 0) << after.out;
        auto verify = run_ctl({"--run-dir", run, "verify", "cut"});
        EXPECT_EQ(verify.exit_code, 0) << verify.out;
        const json doc = run_ctl({"--run-dir", run, "dump", "cut", "--json"}).json();
        std::map<std::string, json> held;
        std::set<std::string> owners_seen;
        for (const auto& a : doc["allocations"]) {
            if (a["state"] != "allocated") continue;
            EXPECT_TRUE(owners_seen.insert(a["address"]).second) << "two owners: " << a.dump();
            held[a["containerID"]].push_back(a["address"]);
        }
        for (auto& [id, addrs] : held) std::sort(addrs.begin(), addrs.end());
        for (const auto& [id, cmd] : known.answered) {
            // Killed after it wrote its answer (the upkeep after answering, or exit): the
            // runtime saw a failure, so its outcome is not one it relies on.
            if (!(cmd == "ADD" ? printed.count(id) : del_answered.count(id))) continue;
            if (cmd == "ADD") {
                EXPECT_EQ(held[id], printed[id]) << id << ": its ADD answered, then it lost or "
                                                 << "changed its addresses";
            } else {
                EXPECT_EQ(held.count(id), 0u)
                    << id << ": its DEL answered, yet it holds " << held[id].dump();
            }
        }
        for (const auto& [id, addrs] : held) {
            EXPECT_TRUE(known.answered.count(id) || known.uncertain.count(id) || id == "after-cut")
                << id << " holds addresses but no operation on it had begun";
        }
    }
}

}  // namespace
}  // namespace shmipam::testing
