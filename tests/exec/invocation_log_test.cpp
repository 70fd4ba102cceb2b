// The invocation log (ipam.logFile, plugin/invocation_log.h) as an operator reads it: one line
// per invocation with what happened, failures at every level, detail at debug with secrets
// masked, bad settings refused, and hundreds of concurrent plugins writing and rotating one file
// without a torn, interleaved or lost line.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>

#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;

std::vector<std::string> lines_of(const std::string& path) {
    std::vector<std::string> out;
    std::ifstream f(path);
    for (std::string line; std::getline(f, line);) out.push_back(line);
    return out;
}

// One invocation's line, whole: nothing torn off either end, nothing of another line inside.
const std::regex kLine(
    R"(time=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=(info|error) cmd=[A-Z]+ container=\S+ )"
    R"(pod=\S+ )"
    R"(ifname=\S+ network=\S+ addresses=\S+ code=\d+ duration_ms=\d+\.\d{3}( msg=".*")?)");

class InvocationLog : public ::testing::Test {
  protected:
    json config(const json& log) const {
        json c = make_config(dir.path(), "logged", "1.0.0", "10.127.0.0/28");
        for (const auto& [k, v] : log.items()) c["ipam"][k] = v;
        return c;
    }
    ProcessResult run(const std::string& cmd, const std::string& id, const json& cfg) const {
        return run_plugin(cni_env(cmd, id, "eth0",
                                  "IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=pod-" + id),
                          cfg.dump());
    }
    TempDir dir;
};

TEST_F(InvocationLog, OneLinePerInvocationSaysWhatHappenedAndFailuresSayWhy) {
    const json cfg = config({{"logFile", dir.sub("shmipam.log")}});
    ASSERT_EQ(run("ADD", "c1", cfg).exit_code, 0);
    ASSERT_EQ(run("DEL", "c1", cfg).exit_code, 0);
    ASSERT_EQ(run("ADD", "c2", cfg).exit_code, 0);
    auto bad = run_plugin(cni_env("ADD", "c3", "eth0", "IgnoreUnknown=1;IP=10.99.0.9"), cfg.dump());
    ASSERT_NE(bad.exit_code, 0);
    const auto lines = lines_of(dir.sub("shmipam.log"));
    ASSERT_EQ(lines.size(), 4u);
    for (const auto& l : lines) EXPECT_TRUE(std::regex_match(l, kLine)) << l;
    EXPECT_NE(lines[0].find(" level=info cmd=ADD container=c1 pod=shop/pod-c1 ifname=eth0 "
                            "network=logged addresses=10.127.0.2/28 code=0 "),
              std::string::npos)
        << lines[0];
    EXPECT_NE(lines[1].find(" level=info cmd=DEL container=c1 "), std::string::npos) << lines[1];
    const json answer = bad.json();
    EXPECT_NE(lines[3].find(" level=error cmd=ADD container=c3 "), std::string::npos) << lines[3];
    EXPECT_NE(lines[3].find(" code=" + std::to_string(answer["code"].get<int>()) + " "),
              std::string::npos)
        << lines[3];
    EXPECT_NE(lines[3].find("msg=\"" + answer["msg"].get<std::string>()), std::string::npos)
        << lines[3] << "\n"
        << bad.out;
}

TEST_F(InvocationLog, ErrorLevelLogsOnlyFailuresAndDebugAddsTheConfigWithSecretsMasked) {
    json cfg = config({{"logFile", dir.sub("errors.log")}, {"logLevel", "error"}});
    ASSERT_EQ(run("ADD", "c1", cfg).exit_code, 0);
    cfg["ipam"]["ranges"] = "not a list";
    ASSERT_NE(run("ADD", "c2", cfg).exit_code, 0);
    const auto errors = lines_of(dir.sub("errors.log"));
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find(" level=error cmd=ADD container=c2 "), std::string::npos) << errors[0];

    json dbg = config({{"logFile", dir.sub("debug.log")}, {"logLevel", "debug"}});
    dbg["ipam"]["etcdPasswordLookalike"] = {{"password", "s3cret"}};
    dbg["ipam"]["unvalidated"] = {{"password", {{"nested", "n3sted"}}}};
    dbg["ipam"]["endpointLookalike"] = "https://user:urlpass@etcd.example:2379/x";
    ASSERT_EQ(run("ADD", "c3", dbg).exit_code, 0);
    const auto debug = lines_of(dir.sub("debug.log"));
    ASSERT_EQ(debug.size(), 2u);
    EXPECT_TRUE(std::regex_match(debug[0], kLine)) << debug[0];
    EXPECT_NE(debug[1].find(" level=debug cmd=ADD container=c3 ipam="), std::string::npos)
        << debug[1];
    EXPECT_NE(debug[1].find("10.127.0.0/28"), std::string::npos) << debug[1];
    for (const char* secret : {"s3cret", "n3sted", "urlpass"}) {
        EXPECT_EQ(debug[1].find(secret), std::string::npos) << debug[1];
    }
}

TEST_F(InvocationLog, BadSettingsAreAConfigErrorNamingTheFieldAndNoLogMeansNoFile) {
    for (const json& bad : {json{{"logFile", "relative.log"}}, json{{"logFile", 7}},
                            json{{"logFile", dir.sub("x.log")}, {"logLevel", "verbose"}},
                            json{{"logFile", dir.sub("x.log")}, {"logMaxSizeMB", 0}},
                            json{{"logFile", dir.sub("x.log")}, {"logMaxFiles", 1.5}}}) {
        auto r = run("ADD", "c1", config(bad));
        EXPECT_EQ(r.exit_code, 1) << bad.dump();
        EXPECT_EQ(r.json()["code"], 7) << r.out;
        EXPECT_NE(r.json()["msg"].get<std::string>().find("ipam.log"), std::string::npos) << r.out;
    }
    EXPECT_FALSE(std::filesystem::exists(dir.sub("x.log")));
    EXPECT_FALSE(std::filesystem::exists(dir.sub("run"))) << "a refused config touched the state";
    ASSERT_EQ(run("ADD", "c1", config(json::object())).exit_code, 0);
    for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
        EXPECT_EQ(e.path().string().find(".log"), std::string::npos) << e.path();
    }
}

// The plugin runs as root: a log path that is a symlink (planted in a directory others can write)
// is never followed, and the invocation still succeeds.
TEST_F(InvocationLog, ALogFileThatIsASymlinkIsNeverWrittenThrough) {
    write_file(dir.sub("target"), "precious\n");
    std::filesystem::create_symlink(dir.sub("target"), dir.sub("planted.log"));
    ASSERT_EQ(run("ADD", "c1", config({{"logFile", dir.sub("planted.log")}})).exit_code, 0);
    EXPECT_EQ(read_file(dir.sub("target")), "precious\n");
}

// 2 x 150 concurrent invocations (ADDs, then DELs while more ADDs run) rotating a 12 KB log
// kept in 20 files: every line is whole, and every invocation has its line (a rotation loses
// none: writers holding the old file finish in file.1).
TEST_F(InvocationLog, ConcurrentPluginsRotatingOneFileNeverTearInterleaveOrLoseALine) {
    json cfg = config(
        {{"logFile", dir.sub("busy.log")}, {"logMaxSizeMB", 12.0 / 1024}, {"logMaxFiles", 20}});
    cfg["ipam"]["ranges"] = json::parse(R"([[{"subnet": "10.127.0.0/23"}]])");
    constexpr int kPods = 150;
    std::vector<std::unique_ptr<Child>> adds, second;
    for (int i = 0; i < kPods; ++i) {
        adds.push_back(std::make_unique<Child>(std::vector<std::string>{SHMIPAM_PLUGIN_PATH},
                                               cni_env("ADD", "a" + std::to_string(i)),
                                               cfg.dump()));
    }
    for (auto& c : adds) ASSERT_EQ(c->wait().exit_code, 0);
    for (int i = 0; i < kPods; ++i) {
        second.push_back(std::make_unique<Child>(
            std::vector<std::string>{SHMIPAM_PLUGIN_PATH},
            cni_env(i % 2 ? "DEL" : "ADD", (i % 2 ? "a" : "b") + std::to_string(i)), cfg.dump()));
    }
    for (auto& c : second) ASSERT_EQ(c->wait().exit_code, 0);
    std::map<std::string, int> per_container;
    size_t files = 0, total = 0, longest_line = 0;
    std::map<std::string, size_t> sizes;
    for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
        const std::string name = e.path().filename().string();
        if (name.rfind("busy.log", 0) != 0 || name == "busy.log.lock") continue;
        ++files;
        sizes[name] = e.file_size();
        for (const auto& l : lines_of(e.path().string())) {
            ++total;
            longest_line = std::max(longest_line, l.size() + 1);
            ASSERT_TRUE(std::regex_match(l, kLine)) << name << ": " << l;
            std::smatch m;
            const std::regex cmd_container(R"( cmd=([A-Z]+) container=(\S+) )");
            ASSERT_TRUE(std::regex_search(l, m, cmd_container));
            ++per_container[m[1].str() + " " + m[2].str()];
        }
    }
    // Rotated by size: a file outgrows 12 KB only by the lines of writers that opened it
    // before it was renamed away and wrote after (each finishes in the file it opened, so that
    // no line is lost); on a loaded machine that can be every concurrent writer of a round.
    for (const auto& [name, size] : sizes) {
        EXPECT_LE(size, 12u * 1024 + size_t(kPods) * longest_line) << name << ": rotated late";
    }
    EXPECT_GE(files, 4u) << "the log was rotated";
    EXPECT_EQ(total, size_t(2 * kPods));
    for (const auto& [k, n] : per_container) EXPECT_EQ(n, 1) << k;
    EXPECT_EQ(per_container.size(), size_t(2 * kPods));
}

}  // namespace
}  // namespace shmipam::testing
