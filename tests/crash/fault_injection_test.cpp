// A real plugin process dies at every named fault point (by _exit and by SIGKILL); then the
// next invocation, shmipamctl verify, the runtime's follow-up DEL and a fill of the network
// show that nothing was lost, duplicated or left stuck. Built only with fault points.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "base/fault_point.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;

struct Scenario {
    std::string point;
    std::string mode;  // "exit" or "kill"
};

void PrintTo(const Scenario& s, std::ostream* os) {
    *os << s.point << "/" << s.mode;
}

class FaultInjection : public ::testing::TestWithParam<Scenario> {
  protected:
    void SetUp() override {
        // Dual-stack, small: 13 IPv4 (.2 - .14) and 14 IPv6 (::2 - ::f) usable addresses.
        cfg = make_config(dir.path(), "crash", "1.1.0");
        cfg["ipam"]["ranges"] =
            json::parse(R"([[{"subnet":"10.40.0.0/28"}],[{"subnet":"fd40::/124"}]])");
        config = cfg.dump();
    }

    ProcessResult plugin(const std::string& cmd, const std::string& id,
                         const std::string& fault = "") {
        auto env = cni_env(cmd, id);
        if (!fault.empty()) {
            env["SHMIPAM_FAULT"] = fault;
            env["SHMIPAM_FAULT_MODE"] = GetParam().mode;
        }
        return run_plugin(env, config);
    }

    void expect_died(const ProcessResult& r) {
        if (GetParam().mode == "kill") {
            EXPECT_EQ(r.signal, 9) << "did not die at " << GetParam().point << ": " << r.out;
        } else {
            EXPECT_EQ(r.exit_code, faults::kFaultExitCode)
                << "did not die at " << GetParam().point << ": " << r.out;
        }
    }

    int verify() { return run_ctl({"--run-dir", dir.sub("run"), "verify", "crash"}).exit_code; }

    std::set<std::string> holders() {
        auto d = run_ctl({"--run-dir", dir.sub("run"), "dump", "crash", "--json"});
        const json doc = d.json();
        std::set<std::string> out;
        for (const auto& a : doc["allocations"]) {
            if (a["state"] == "allocated") out.insert(a["containerID"].get<std::string>());
        }
        return out;
    }

    TempDir dir;
    json cfg;
    std::string config;
};

TEST_P(FaultInjection, NothingIsLostDuplicatedOrStuck) {
    const std::string& point = GetParam().point;
    const bool on_create = point.rfind("create.", 0) == 0;
    const bool on_del = point.rfind("del.", 0) == 0;
    const bool on_heal = point.rfind("heal.", 0) == 0 || point.rfind("reap.", 0) == 0;
    const bool on_retire = point.rfind("retire.", 0) == 0;
    const bool on_checkpoint = point.rfind("checkpoint.", 0) == 0;
    const bool on_compact = point.rfind("compact.", 0) == 0;
    if (on_compact) {
        cfg["ipam"]["journalMaxSegments"] = 1;
        config = cfg.dump();
    }

    if (!on_create) {
        ASSERT_EQ(plugin("ADD", "before").exit_code, 0);
    }
    if (on_del) {
        ASSERT_EQ(plugin("ADD", "victim").exit_code, 0);
    }
    if (on_checkpoint) {
        // More than a segment of journal (2 records per dual-stack ADD or DEL), then a lost
        // arena: the victim rebuilds, publishes, and dies compacting.
        for (int i = 0; i < 1030; ++i) {
            ASSERT_EQ(plugin("ADD", "churn").exit_code, 0);
            ASSERT_EQ(plugin("DEL", "churn").exit_code, 0);
        }
        std::filesystem::remove_all(dir.sub("run"));
        expect_died(plugin("ADD", "victim", point));
    } else if (on_compact) {
        // Records 0..5119 (2 per dual-stack ADD or DEL: the ADD before, 1279 ADD+DEL pairs, a
        // pad ADD): the victim's ADD reserves record 5120, a quarter into segment 1, so with
        // journalMaxSegments 1 it compacts after answering, and dies there.
        for (int i = 0; i < 1279; ++i) {
            ASSERT_EQ(plugin("ADD", "churn").exit_code, 0);
            ASSERT_EQ(plugin("DEL", "churn").exit_code, 0);
        }
        ASSERT_EQ(plugin("ADD", "pad").exit_code, 0);
        expect_died(plugin("ADD", "victim", point));
        ASSERT_EQ(plugin("DEL", "pad").exit_code, 0);
    } else if (on_retire) {
        // A damaged block makes the next ADD retire the state; it dies right after the flag.
        std::string block;
        for (const auto& f : std::filesystem::directory_iterator(dir.sub("run/crash"))) {
            if (f.path().extension() == ".blk") block = f.path();
        }
        ASSERT_FALSE(block.empty());
        std::string bytes = read_file(block);
        bytes[40] ^= 0x01;
        write_file(block, bytes);
        expect_died(plugin("ADD", "victim", point));
    } else if (on_heal) {
        // A victim dies with both slots published, then a healer dies while healing it.
        expect_died(plugin("ADD", "victim", "add.before_commit"));
        expect_died(plugin("ADD", "healer", point));
    } else {
        expect_died(plugin(on_del ? "DEL" : "ADD", "victim", point));
    }

    // The next invocation heals whatever was left and works.
    auto after = plugin("ADD", "after");
    ASSERT_EQ(after.exit_code, 0) << after.out;
    EXPECT_EQ(verify(), 0) << run_ctl({"--run-dir", dir.sub("run"), "verify", "crash"}).out;
    for (const auto& f : std::filesystem::directory_iterator(dir.sub("run/crash"))) {
        EXPECT_EQ(f.path().filename().string().find(".tmp."), std::string::npos)
            << "left aside: " << f.path();
    }

    if (on_checkpoint || on_compact) {
        // The checkpoint and the segments it covers may both exist: a rebuild reads them
        // together.
        std::filesystem::remove_all(dir.sub("run"));
        ASSERT_EQ(plugin("ADD", "after").exit_code, 0);
        EXPECT_EQ(verify(), 0);
    }
    // The runtime DELs the attachments whose ADD (or DEL) failed.
    ASSERT_EQ(plugin("DEL", "victim").exit_code, 0);
    ASSERT_EQ(plugin("DEL", "healer").exit_code, 0);
    std::set<std::string> expected{"after"};
    if (!on_create) expected.insert("before");
    EXPECT_EQ(holders(), expected);
    EXPECT_EQ(verify(), 0);

    // Not one address leaked: filling the network gives exactly the usable ones (13 IPv4).
    int added = int(expected.size());
    for (int i = 0; i < 20; ++i) {
        auto r = plugin("ADD", "fill" + std::to_string(i));
        if (r.exit_code != 0) {
            EXPECT_EQ(r.json()["code"], 100) << r.out;
            break;
        }
        ++added;
    }
    EXPECT_EQ(added, 13);
    EXPECT_EQ(verify(), 0);

    // The journal agrees with the arena: lost and rebuilt, the state holds the same attachments
    // (no allocation resurrected from a record of a claim that was rolled back).
    const std::set<std::string> before_loss = holders();
    std::filesystem::remove_all(dir.sub("run"));
    ASSERT_EQ(plugin("ADD", "after").exit_code, 0);
    EXPECT_EQ(holders(), before_loss);
    EXPECT_EQ(verify(), 0);
}

std::vector<Scenario> scenarios() {
    std::vector<Scenario> out;
    for (auto p : faults::kAllPoints) {
        for (const char* mode : {"exit", "kill"}) out.push_back({std::string(p), mode});
    }
    return out;
}

INSTANTIATE_TEST_SUITE_P(EveryPoint, FaultInjection, ::testing::ValuesIn(scenarios()),
                         [](const auto& info) {
                             std::string n = info.param.point + "_" + info.param.mode;
                             for (char& c : n) {
                                 if (c == '.') c = '_';
                             }
                             return n;
                         });

}  // namespace
}  // namespace shmipam::testing
