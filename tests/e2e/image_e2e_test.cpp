// The install image as a node runs it (deploy/): deploy/build-image.sh builds the FROM-scratch
// image with podman from this build, the image's entry point installs into temporary "host"
// directories mounted where the DaemonSet mounts the node's, and the installed plugin serves a
// real ADD with the installed conflist's config.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/e2e/e2e_support.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;

class InstallImage : public ::testing::Test {
  protected:
    void SetUp() override {
        SHMIPAM_REQUIRE_ROOT();
        SHMIPAM_REQUIRE_TOOL("/usr/bin/podman");
        SHMIPAM_REQUIRE_TOOL(RUNC_PATH);
        for (const char* d : {"host/opt/cni/bin", "host/etc/cni/net.d", "config"}) {
            std::filesystem::create_directories(dir.sub(d));
        }
    }
    std::string podman_opts() const {
        std::string opts;
        for (const auto& a : podman_argv(dir.path())) {
            if (a != "/usr/bin/podman") opts += a + " ";
        }
        return opts;
    }
    // The image run as the DaemonSet's init container runs it: the node's directories mounted
    // under /host, and `args` (which replace the image's CMD) when given.
    ProcessResult run_image(const std::string& tag, const std::vector<std::string>& args = {}) {
        std::vector<std::string> argv = podman_argv(dir.path());
        for (const std::string& a :
             {std::string("run"), std::string("--rm"), std::string("--network"),
              std::string("none"), std::string("-v"),
              dir.sub("host/opt/cni/bin") + ":/host/opt/cni/bin", std::string("-v"),
              dir.sub("host/etc/cni/net.d") + ":/host/etc/cni/net.d", std::string("-v"),
              dir.sub("config") + ":/config", tag}) {
            argv.push_back(a);
        }
        argv.insert(argv.end(), args.begin(), args.end());
        return run_process(argv, {{"HOME", "/root"}}, "");
    }
    TempDir dir;
};

TEST_F(InstallImage, TheImageInstallsThePluginAndConflistAndTheInstalledPluginServesAnAdd) {
    const std::string build_dir = std::filesystem::path(SHMIPAM_PLUGIN_PATH).parent_path().string();
    auto built = run_process({"/bin/bash", SHMIPAM_SOURCE_DIR "/deploy/build-image.sh",
                              "--build-dir", build_dir, "--tag", "localhost/shmipam:e2e"},
                             {{"PODMAN_OPTS", podman_opts()}, {"HOME", "/root"}}, "");
    ASSERT_EQ(built.exit_code, 0) << built.out << built.err;
    auto installed = run_image("localhost/shmipam:e2e");
    ASSERT_EQ(installed.exit_code, 0) << installed.out << installed.err;
    EXPECT_EQ(read_file(dir.sub("host/opt/cni/bin/shmipam")), read_file(SHMIPAM_PLUGIN_PATH));
    const json conflist = json::parse(read_file(dir.sub("host/etc/cni/net.d/10-shmipam.conflist")));
    EXPECT_EQ(conflist, json::parse(read_file(SHMIPAM_SOURCE_DIR "/deploy/10-shmipam.conflist")));
    // A restarted DaemonSet pod installs again: nothing changes.
    auto again = run_image("localhost/shmipam:e2e");
    ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
    EXPECT_NE(again.out.find("unchanged /host/opt/cni/bin/shmipam"), std::string::npos)
        << again.out;
    // With the DaemonSet's args: its ConfigMap's conflist instead of the image's default.
    json mine = conflist;
    mine["name"] = "mine";
    write_file(dir.sub("config/20-mine.conflist"), mine.dump());
    auto daemonset = run_image("localhost/shmipam:e2e", {"--conf", "/config/20-mine.conflist"});
    ASSERT_EQ(daemonset.exit_code, 0) << daemonset.out << daemonset.err;
    EXPECT_EQ(json::parse(read_file(dir.sub("host/etc/cni/net.d/20-mine.conflist"))), mine);
    // The installed plugin, with the installed conflist's IPAM config (its state directories
    // moved into the test's).
    json plugin = conflist["plugins"][0];
    plugin["cniVersion"] = conflist["cniVersion"];
    plugin["name"] = conflist["name"];
    plugin["ipam"]["runDir"] = dir.sub("run");
    plugin["ipam"]["dataDir"] = dir.sub("data");
    auto add =
        run_process({dir.sub("host/opt/cni/bin/shmipam")}, cni_env("ADD", "c1"), plugin.dump());
    ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
    EXPECT_EQ(add.json()["ips"][0]["address"], "10.244.0.2/24");
    // The node pass's shmipamctl loads in the image (its libraries came with it) and its etcd
    // client runs: with no network, etcd is unavailable, said as such.
    json cluster = {{"cniVersion", "1.1.0"},
                    {"name", "c"},
                    {"type", "bridge"},
                    {"ipam",
                     {{"type", "shmipam"},
                      {"poolsDir", "/config/pools"},
                      {"nodeName", "node-a"},
                      {"runDir", "/config/run"},
                      {"dataDir", "/config/data"},
                      {"etcd", {{"endpoints", {"http://127.0.0.1:1"}}, {"budgetMs", 500}}}}}};
    write_file(dir.sub("config/cluster.conflist"), cluster.dump());
    std::vector<std::string> argv = podman_argv(dir.path());
    for (const std::string& a :
         {std::string("run"), std::string("--rm"), std::string("--network"), std::string("none"),
          std::string("-v"), dir.sub("config") + ":/config", std::string("--entrypoint"),
          std::string("/opt/shmipam/bin/shmipamctl-cluster"), std::string("localhost/shmipam:e2e"),
          std::string("cluster"), std::string("pass"), std::string("--config"),
          std::string("/config/cluster.conflist")}) {
        argv.push_back(a);
    }
    auto pass = run_process(argv, {{"HOME", "/root"}}, "");
    EXPECT_EQ(pass.exit_code, 2) << pass.out << pass.err;
    EXPECT_NE(pass.err.find("etcd unavailable"), std::string::npos) << pass.out << pass.err;
}

}  // namespace
}  // namespace shmipam::testing
