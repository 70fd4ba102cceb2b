// shmipamctl states remove killed at every step (tools/state_removal.h): the removal runs in a
// forked child armed at each fault point (exit or SIGKILL there); the state must be whole or
// removed, the next run's finish must leave no trace, and the pool added back must get a fresh
// state that verifies, served by the plugin under test.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "base/fault_point.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"
#include "tools/state_removal.h"

namespace shmipam::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* kGone = R"(apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderIPPool
metadata: {name: gone}
spec: {subnet: 10.42.0.0/24, ips: ["10.42.0.5-10.42.0.9"], gateway: 10.42.0.1, default: true}
)";

struct Node {
    TempDir dir;
    Node() {
        fs::create_directories(dir.sub("pools"));
        write_file(dir.sub("pools/gone.yaml"), kGone);
    }
    json config() const {
        return {{"cniVersion", "1.1.0"},
                {"name", "net"},
                {"type", "bridge"},
                {"ipam",
                 {{"type", "shmipam"},
                  {"runDir", dir.sub("run")},
                  {"dataDir", dir.sub("data")},
                  {"poolsDir", dir.sub("pools")},
                  {"nodeName", "node-a"},
                  {"reuseDelay", 0}}}};
    }
    ProcessResult run(const std::string& cmd, const std::string& id) const {
        return run_plugin(
            cni_env(cmd, id, "eth0", "IgnoreUnknown=1;K8S_POD_NAMESPACE=d;K8S_POD_NAME=p" + id),
            config().dump());
    }
    tools::PoolStateDirs dirs() const { return {dir.sub("run/_pools"), dir.sub("data/_pools")}; }
    bool whole() const {
        return fs::exists(dir.sub("run/_pools/ippool_gone/index")) &&
               fs::exists(dir.sub("data/_pools/ippool_gone"));
    }
    bool traced() const {  // any directory of the state, under any name
        for (const char* d : {"run/_pools", "data/_pools"}) {
            for (const auto& e : fs::directory_iterator(dir.sub(d))) {
                if (e.path().filename().string().find("gone") != std::string::npos) return true;
            }
        }
        return false;
    }
};

TEST(StateRemovalCrash, KilledAtEveryStepTheStateIsWholeOrRemovedAndTheNextRunFinishesIt) {
    for (std::string_view point : faults::kStateRemovalPoints) {
        for (faults::Mode mode : {faults::Mode::kExit, faults::Mode::kKill}) {
            SCOPED_TRACE(std::string(point) + (mode == faults::Mode::kKill ? " SIGKILL" : " exit"));
            Node node;
            ASSERT_EQ(node.run("ADD", "a1").exit_code, 0);
            ASSERT_EQ(node.run("DEL", "a1").exit_code, 0);
            ASSERT_EQ(::unlink(node.dir.sub("pools/gone.yaml").c_str()), 0);
            ASSERT_TRUE(node.whole());
            const pid_t child = ::fork();
            ASSERT_GE(child, 0);
            if (child == 0) {
                faults::arm(point, mode, 0);
                (void)tools::remove_pool_state(node.dirs(), "ippool_gone");
                ::_exit(0);  // not reached: the point was
            }
            int status = 0;
            ASSERT_EQ(::waitpid(child, &status, 0), child);
            const bool died =
                mode == faults::Mode::kKill
                    ? WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL
                    : WIFEXITED(status) && WEXITSTATUS(status) == faults::kFaultExitCode;
            ASSERT_TRUE(died) << "the removal did not reach " << point << ": " << status;
            // Whole (nothing set aside) or removed: its journal, what a node lists its pool
            // states by and a rebuild reads, is no longer there under its name.
            const bool removed = !fs::exists(node.dir.sub("data/_pools/ippool_gone"));
            EXPECT_TRUE(node.whole() || removed);
            auto finished = tools::finish_removals(node.dirs());
            ASSERT_TRUE(finished) << finished.error().msg;
            EXPECT_FALSE(node.traced()) << "the next run finishes the removal";
            // The pool back: served from a state that verifies.
            write_file(node.dir.sub("pools/gone.yaml"), kGone);
            auto again = node.run("ADD", "a2");
            ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
            auto verify = run_ctl({"--run-dir", node.dir.sub("run"), "verify", "pool/gone"});
            EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
        }
    }
}

}  // namespace
}  // namespace shmipam::testing
