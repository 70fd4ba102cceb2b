// shmipam under a real container runtime: podman (CNI network backend, runc) starts containers
// on a bridge network whose ipam is shmipam, as a node's runtime would. The containers' root
// file system is busybox-static (no image pulled); podman's storage, network config and CNI
// plugin path live in the test's directory, so the host's podman setup is never touched.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "tests/e2e/e2e_support.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;

constexpr const char* kPodman = "/usr/bin/podman";
constexpr const char* kBusybox = "/bin/busybox";
constexpr const char* kCniPlugins = "/usr/lib/cni";

class PodmanE2E : public ::testing::Test {
  protected:
    void SetUp() override {
        SHMIPAM_REQUIRE_ROOT();
        for (const char* need : {kPodman, kBusybox, RUNC_PATH}) SHMIPAM_REQUIRE_TOOL(need);
        namespace fs = std::filesystem;
        fs::create_directories(dir.sub("bin"));
        fs::create_directories(dir.sub("net"));
        fs::create_directories(dir.sub("rootfs/bin"));
        fs::copy_file(SHMIPAM_PLUGIN_PATH, dir.sub("bin/shmipam"));
        fs::copy_file(kBusybox, dir.sub("rootfs/bin/busybox"));
        fs::create_symlink("busybox", dir.sub("rootfs/bin/sh"));
        const std::string tag = std::to_string(::getpid() % 100000);
        bridge = "shmpm" + tag;
        network = "shmpm" + tag;
        const json conflist{
            {"cniVersion", "1.0.0"},
            {"name", network},
            {"plugins", json::array({{{"type", "bridge"},
                                      {"bridge", bridge},
                                      {"isGateway", true},
                                      {"ipMasq", false},
                                      {"capabilities", {{"ips", true}}},
                                      {"ipam",
                                       {{"type", "shmipam"},
                                        {"subnet", "10.124.0.0/24"},
                                        {"runDir", dir.sub("run")},
                                        {"dataDir", dir.sub("data")},
                                        {"routes", json::array({{{"dst", "0.0.0.0/0"}}})}}}}})}};
        std::ofstream(dir.sub("net/" + network + ".conflist")) << conflist.dump(2);
        std::ofstream(dir.sub("containers.conf"))
            << "[network]\nnetwork_backend = \"cni\"\ncni_plugin_dirs = [\"" << dir.sub("bin")
            << "\", \"" << kCniPlugins << "\"]\nnetwork_config_dir = \"" << dir.sub("net")
            << "\"\n";
    }
    void TearDown() override {
        if (bridge.empty()) return;
        podman({"rm", "--all", "--force", "--time", "0"});
        run_process({"/usr/sbin/ip", "link", "del", bridge}, {}, "");
    }

    ProcessResult podman(std::vector<std::string> args) const {
        std::vector<std::string> argv = podman_argv(dir.path());
        argv.insert(argv.end(), args.begin(), args.end());
        return run_process(
            argv, {{"CONTAINERS_CONF", dir.sub("containers.conf")}, {"HOME", "/root"}}, "");
    }
    // A container sleeping on the network; its id.
    std::string start(const std::string& name, const std::vector<std::string>& extra = {}) {
        // NET_RAW: busybox's ping (podman's default capabilities leave it out).
        std::vector<std::string> args{"run",       "--detach", "--name",    name,
                                      "--network", network,    "--cap-add", "NET_RAW"};
        args.insert(args.end(), extra.begin(), extra.end());
        for (const char* a : {"--rootfs", "", "/bin/busybox", "sleep", "600"}) args.push_back(a);
        args[args.size() - 4] = dir.sub("rootfs");
        auto r = podman(args);
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
        return r.exit_code == 0 ? r.out.substr(0, r.out.find('\n')) : "";
    }
    // The address podman reports for the container on the network.
    std::string reported(const std::string& name) const {
        auto r =
            podman({"inspect", "--format",
                    "{{(index .NetworkSettings.Networks \"" + network + "\").IPAddress}}", name});
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
        return r.out.substr(0, r.out.find('\n'));
    }
    // The IPv4 address on the container's eth0, as the container sees it.
    std::string inside(const std::string& name) const {
        auto r = podman({"exec", name, "/bin/busybox", "ip", "-4", "-o", "addr", "show", "eth0"});
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
        const size_t at = r.out.find("inet ");
        if (at == std::string::npos) return "";
        const size_t from = at + 5;
        return r.out.substr(from, r.out.find('/', from) - from);
    }
    bool pings(const std::string& from, const std::string& address) const {
        return podman({"exec", from, "/bin/busybox", "ping", "-c", "1", "-W", "2", address})
                   .exit_code == 0;
    }
    // Addresses shmipam holds for the network, by container id.
    std::map<std::string, std::string> held() const {
        auto r = run_ctl(
            {"--run-dir", dir.sub("run"), "dump", network, "--state", "allocated", "--json"});
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
        std::map<std::string, std::string> out;
        const json j = r.json();
        for (const auto& e : j.value("allocations", json::array())) {
            out[e.value("containerID", "")] = e.value("address", "");
        }
        return out;
    }
    void verify_clean() const {
        auto v = run_ctl({"--run-dir", dir.sub("run"), "verify", network});
        EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
    }

    TempDir dir;
    std::string bridge, network;
};

TEST_F(PodmanE2E, ContainersGetDistinctAddressesThatPodmanReportsAndReachEachOther) {
    std::vector<std::string> names{"a", "b", "c"}, addresses;
    std::map<std::string, std::string> ids;
    for (const auto& n : names) ids[start(n)] = n;
    ASSERT_FALSE(HasFailure());
    for (const auto& n : names) {
        const std::string a = reported(n);
        EXPECT_EQ(inside(n), a) << n << ": the address inside is the one podman reports";
        addresses.push_back(a);
    }
    EXPECT_EQ(std::set<std::string>(addresses.begin(), addresses.end()).size(), 3u)
        << addresses[0] << " " << addresses[1] << " " << addresses[2];
    // shmipam holds exactly those, for those containers.
    const auto h = held();
    ASSERT_EQ(h.size(), 3u);
    for (const auto& [id, a] : h) {
        ASSERT_TRUE(ids.count(id)) << id << " is not a container of the test";
        EXPECT_EQ(a.substr(0, a.find('/')), reported(ids[id]));
    }
    EXPECT_TRUE(pings("a", addresses[1]));
    EXPECT_TRUE(pings("c", addresses[0]));
    verify_clean();
}

TEST_F(PodmanE2E, RmForceFreesEveryAddressAndARestartedContainerKeepsWorking) {
    start("a");
    start("b");
    ASSERT_FALSE(HasFailure());
    auto r = podman({"restart", "--time", "0", "a"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const std::string after = reported("a");
    EXPECT_EQ(inside("a"), after);
    EXPECT_TRUE(pings("a", reported("b"))) << "a restarted container reaches the others";
    EXPECT_TRUE(pings("b", after));
    EXPECT_EQ(held().size(), 2u) << "the restart's DEL and ADD leave one address per container";
    r = podman({"rm", "--force", "--time", "0", "a", "b"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_TRUE(held().empty()) << "podman rm -f freed every address";
    verify_clean();
}

TEST_F(PodmanE2E, RunWithIpGetsThatAddress) {
    start("fixed", {"--ip", "10.124.0.77"});
    ASSERT_FALSE(HasFailure());
    EXPECT_EQ(reported("fixed"), "10.124.0.77");
    EXPECT_EQ(inside("fixed"), "10.124.0.77");
    start("other");
    EXPECT_NE(reported("other"), "10.124.0.77");
    verify_clean();
}

// What podman (4.3, CNI backend) passes to the IPAM plugin, recorded by a script in front of
// the plugin: docs/pools.md, "What each runtime passes". Even with the pod-annotations
// capability declared, podman passes no annotations and no labels: CNI_ARGS names the container
// only, and runtimeConfig holds only what podman itself was asked for (here nothing, so none).
TEST_F(PodmanE2E, PassesTheIpamPluginNoLabelsNoAnnotationsAndOnlyTheContainerName) {
    namespace fs = std::filesystem;
    const std::string calls = dir.sub("calls");
    fs::create_directories(calls);
    fs::remove(dir.sub("bin/shmipam"));
    std::ofstream(dir.sub("bin/shmipam")) << "#!/bin/sh\nrec=\"" << calls << "/$(date +%s%N).$$\"\n"
                                          << "cat > \"$rec.stdin\"\nenv -0 > \"$rec.env\"\nexec "
                                          << SHMIPAM_PLUGIN_PATH << " < \"$rec.stdin\"\n";
    fs::permissions(dir.sub("bin/shmipam"), fs::perms::owner_all);
    json conflist = json::parse(std::ifstream(dir.sub("net/" + network + ".conflist")));
    conflist["plugins"][0]["capabilities"]["io.kubernetes.cri.pod-annotations"] = true;
    std::ofstream(dir.sub("net/" + network + ".conflist"), std::ios::trunc) << conflist.dump();

    const std::string label = "label-" + std::to_string(::getpid()) + "-marker";
    const std::string annotation = "annotation-" + std::to_string(::getpid()) + "-marker";
    const std::string id = start(
        "facts", {"--label", "marker=" + label, "--annotation", "example.com/note=" + annotation});
    ASSERT_FALSE(HasFailure());
    auto r = podman({"rm", "--force", "--time", "0", "facts"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;

    std::vector<std::string> bases;
    for (const auto& e : fs::directory_iterator(calls)) {
        const std::string name = e.path().string();
        if (name.size() > 4 && name.substr(name.size() - 4) == ".env") {
            bases.push_back(name.substr(0, name.size() - 4));
        }
    }
    std::sort(bases.begin(), bases.end());
    std::vector<std::string> commands;
    for (const auto& base : bases) {
        std::stringstream env_text, stdin_text;
        env_text << std::ifstream(base + ".env").rdbuf();
        stdin_text << std::ifstream(base + ".stdin").rdbuf();
        std::map<std::string, std::string> env;
        std::string kv;
        while (std::getline(env_text, kv, '\0')) {
            const size_t eq = kv.find('=');
            if (kv.rfind("CNI_", 0) == 0 && eq != std::string::npos) {
                env[kv.substr(0, eq)] = kv.substr(eq + 1);
            }
        }
        commands.push_back(env["CNI_COMMAND"]);
        EXPECT_EQ(env["CNI_CONTAINERID"], id);
        EXPECT_EQ(env["CNI_ARGS"], "IgnoreUnknown=1;K8S_POD_NAME=facts")
            << "no namespace, no uid, no pod: the container's name only";
        const json in = json::parse(stdin_text.str());
        EXPECT_FALSE(in.contains("runtimeConfig")) << in.dump();
        EXPECT_FALSE(in.contains("args")) << in.dump();
        for (const auto& text : {env_text.str(), stdin_text.str()}) {
            EXPECT_EQ(text.find(label), std::string::npos) << "a label reached the plugin";
            EXPECT_EQ(text.find(annotation), std::string::npos) << "an annotation did";
        }
    }
    EXPECT_EQ(commands, (std::vector<std::string>{"ADD", "DEL"}));
    EXPECT_TRUE(held().empty());
    verify_clean();
}

}  // namespace
}  // namespace shmipam::testing
