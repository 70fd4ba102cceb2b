// A sticky pod's ADD or DEL dies at every step of its path (the claim's own steps and the ADD and
// DEL steps it passes through, by _exit and by SIGKILL). Then the runtime's follow-up (the DEL of
// the sandbox whose operation failed, the pod's next sandbox) must find: the name keeps one
// address, never held twice; nobody else gets it; verify is clean; a rebuild agrees.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "base/fault_point.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;

struct Scenario {
    std::string op;      // "ADD" or "DEL" (of the sticky pod's sandbox)
    std::string point;   // where it dies
    int skip;            // earlier hits of the point passed by
    std::string mode;    // "exit" or "kill"
    std::string policy;  // the claim policy annotation ("" never, "0" at DEL)
};

void PrintTo(const Scenario& s, std::ostream* os) {
    *os << s.op << "/" << s.point << "/" << s.skip << "/" << s.mode << "/" << s.policy;
}

class ClaimCrash : public ::testing::TestWithParam<Scenario> {
  protected:
    void SetUp() override {
        // 13 usable IPv4 addresses (.2 - .14).
        base = make_config(dir.path(), "crash", "1.1.0", "10.40.0.0/28");
        sticky = base;
        json annotations{{"ipam.shmipam.io/static-ip", "true"}};
        if (!GetParam().policy.empty()) {
            annotations["ipam.shmipam.io/ip-claim-policy"] = GetParam().policy;
        }
        sticky["runtimeConfig"]["io.kubernetes.cri.pod-annotations"] = annotations;
        sticky["args"]["cni"]["labels"] =
            json::array({{{"key", "statefulset.kubernetes.io/pod-name"}, {"value", "db-0"}}});
    }
    ProcessResult plugin(const std::string& cmd, const std::string& id, bool is_sticky,
                         bool armed = false) {
        auto env = cni_env(cmd, id, "eth0",
                           std::string("K8S_POD_NAMESPACE=shop;K8S_POD_NAME=") +
                               (is_sticky ? "db-0" : "web-" + id));
        if (armed) {
            env["SHMIPAM_FAULT"] = GetParam().point;
            env["SHMIPAM_FAULT_MODE"] = GetParam().mode;
            env["SHMIPAM_FAULT_SKIP"] = std::to_string(GetParam().skip);
        }
        return run_plugin(env, (is_sticky ? sticky : base).dump());
    }
    std::string address_of(const ProcessResult& r) {
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
        return r.exit_code == 0 ? r.json()["ips"][0]["address"].get<std::string>() : "";
    }
    int verify() {
        auto r = run_ctl({"--run-dir", dir.sub("run"), "verify", "crash"});
        EXPECT_EQ(r.exit_code, 0) << r.out;
        return r.exit_code;
    }
    json claims() {
        return run_ctl({"--run-dir", dir.sub("run"), "claims", "crash", "--json"}).json()["claims"];
    }
    // Every allocated address once, and who holds it.
    std::map<std::string, std::string> holders() {
        const json d = run_ctl({"--run-dir", dir.sub("run"), "dump", "crash", "--json"}).json();
        std::map<std::string, std::string> out;
        for (const auto& a : d["allocations"]) {
            if (a["state"] != "allocated") continue;
            EXPECT_TRUE(out.emplace(a["address"], a["containerID"]).second) << a;
        }
        return out;
    }

    TempDir dir;
    json base, sticky;
};

TEST_P(ClaimCrash, TheNameKeepsOneAddressAndNobodyElseGetsIt) {
    const Scenario& s = GetParam();
    ASSERT_EQ(plugin("ADD", "before", false).exit_code, 0);
    std::string claimed;
    if (s.op == "DEL") {
        claimed = address_of(plugin("ADD", "v1", true));
        auto r = plugin("DEL", "v1", true, true);
        if (s.mode == "kill") {
            EXPECT_EQ(r.signal, 9) << "did not die at " << s.point << ": " << r.out;
        } else {
            EXPECT_EQ(r.exit_code, 77) << "did not die at " << s.point << ": " << r.out;
        }
    } else {
        auto r = plugin("ADD", "v1", true, true);
        if (s.mode == "kill") {
            EXPECT_EQ(r.signal, 9) << "did not die at " << s.point << ": " << r.out;
        } else {
            EXPECT_EQ(r.exit_code, 77) << "did not die at " << s.point << ": " << r.out;
        }
    }
    // The next invocation heals whatever was left and works; the state is consistent.
    ASSERT_EQ(plugin("ADD", "after", false).exit_code, 0);
    verify();
    // The runtime DELs the sandbox whose operation failed.
    ASSERT_EQ(plugin("DEL", "v1", true).exit_code, 0);
    verify();
    // The pod's next sandbox: the name's address, if it had one that a policy keeps.
    const std::string next = address_of(plugin("ADD", "v2", true));
    if (!claimed.empty() && s.policy.empty()) EXPECT_EQ(next, claimed);
    ASSERT_EQ(claims().size(), 1u) << claims();
    EXPECT_EQ(claims()[0]["containerID"], "v2");
    verify();
    // Fill the network: every other address, none of them the name's, none leaked: 13 usable,
    // less the name's one, less "before" and "after".
    int added = 0;
    for (int i = 0; i < 20; ++i) {
        auto r = plugin("ADD", "fill" + std::to_string(i), false);
        if (r.exit_code != 0) {
            EXPECT_EQ(r.json()["code"], 100) << r.out;
            break;
        }
        EXPECT_NE(r.json()["ips"][0]["address"], next);
        ++added;
    }
    EXPECT_EQ(added, 10);
    const auto held = holders();
    EXPECT_EQ(held.size(), 13u);
    verify();
    // Lost and rebuilt from the journal (same boot): the same holders, the claim kept.
    std::filesystem::remove_all(dir.sub("run"));
    ASSERT_EQ(plugin("ADD", "after", false).exit_code, 0);
    EXPECT_EQ(holders(), held);
    ASSERT_EQ(claims().size(), 1u);
    verify();
}

std::vector<Scenario> scenarios() {
    std::vector<Scenario> out;
    const std::vector<std::pair<std::string, std::string>> add_points = {
        {"ADD", "claim.after_claim_commit"},   {"ADD", "claim.before_sandbox_commit"},
        {"ADD", "claim.after_sandbox_commit"}, {"ADD", "claim.before_bind"},
        {"ADD", "add.after_entry_claim"},      {"ADD", "add.after_slot_claim"},
        {"ADD", "add.before_commit"},          {"ADD", "add.after_commit"},
        {"ADD", "journal.after_sync"}};
    const std::vector<std::pair<std::string, std::string>> del_points = {
        {"DEL", "del.after_target"},
        {"DEL", "claim.after_unbind"},
        {"DEL", "del.after_entry_release"},
        {"DEL", "del.after_release"}};
    for (const char* mode : {"exit", "kill"}) {
        for (const auto& [op, p] : add_points) out.push_back({op, p, 0, mode, ""});
        for (const auto& [op, p] : del_points) {
            out.push_back({op, p, 0, mode, ""});
            out.push_back({op, p, 0, mode, "0"});
        }
        // Policy 0: the DEL goes on to release the claim itself: the second pass of the release
        // steps (the sandbox's entry, which holds no slot, passed the first).
        for (const char* p : {"del.after_target", "del.after_entry_release", "del.after_release"}) {
            out.push_back({"DEL", p, 1, mode, "0"});
        }
        for (const char* p : {"del.after_slot_releasing", "del.after_slot_cooling"}) {
            out.push_back({"DEL", p, 0, mode, "0"});
        }
    }
    return out;
}

INSTANTIATE_TEST_SUITE_P(EveryStep, ClaimCrash, ::testing::ValuesIn(scenarios()),
                         [](const auto& info) {
                             const Scenario& s = info.param;
                             std::string n = s.op + "_" + s.point + "_" + std::to_string(s.skip) +
                                             "_" + s.mode + (s.policy.empty() ? "" : "_policy0");
                             for (char& c : n) {
                                 if (c == '.') c = '_';
                             }
                             return n;
                         });

// Every claim point is among the scenarios.
TEST(ClaimCrashCoverage, EveryClaimPointIsExercised) {
    std::set<std::string> covered;
    for (const auto& s : scenarios()) covered.insert(s.point);
    for (auto p : faults::kClaimPoints) EXPECT_TRUE(covered.count(std::string(p))) << p;
}

// Guards against: a claim left idle by an ADD or DEL that died (before binding it, or between
// unbinding it and setting its due time) was never freed when its pod did not come back: no due
// time was set, so no invocation ever walked to it. Its due time is now set before the CAS.
class ClaimCrashNoReturn : public ClaimCrash {};

TEST_P(ClaimCrashNoReturn, AClaimLeftIdleByADeadOperationIsFreedByItsPolicy) {
    const Scenario& s = GetParam();
    ASSERT_EQ(plugin("ADD", "before", false).exit_code, 0);
    if (s.op == "DEL") ASSERT_EQ(plugin("ADD", "v1", true).exit_code, 0);
    auto r = plugin(s.op, "v1", true, true);
    EXPECT_EQ(r.signal, 9) << "did not die at " << s.point << ": " << r.out;
    // The runtime's DEL; the pod never comes back.
    ASSERT_EQ(plugin("DEL", "v1", true).exit_code, 0);
    verify();
    ASSERT_LE(claims().size(), 1u);
    ::sleep(2);  // the policy: 1 s idle
    ASSERT_EQ(plugin("ADD", "after", false).exit_code, 0);
    EXPECT_TRUE(claims().empty()) << claims();
    verify();
}

INSTANTIATE_TEST_SUITE_P(
    PolicyOneSecond, ClaimCrashNoReturn,
    ::testing::Values(Scenario{"ADD", "claim.after_claim_commit", 0, "kill", "1s"},
                      Scenario{"ADD", "claim.after_sandbox_commit", 0, "kill", "1s"},
                      Scenario{"ADD", "claim.before_bind", 0, "kill", "1s"},
                      Scenario{"DEL", "claim.after_unbind", 0, "kill", "1s"}),
    [](const auto& info) {
        std::string n = info.param.op + "_" + info.param.point;
        for (char& c : n) {
            if (c == '.') c = '_';
        }
        return n;
    });

}  // namespace
}  // namespace shmipam::testing
