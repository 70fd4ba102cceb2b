// The install image as a node runs it (deploy/): deploy/build-image.sh builds the FROM-scratch
// image with podman from this build, the image's entry point installs into temporary "host"
// directories mounted where the DaemonSet mounts the node's, and the installed plugin serves a
// real ADD with the installed conflist's config. The dynamic helpers the image ships run in
// the image, and, installed onto the "host" with their libraries, on a root file system that
// has nothing but glibc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

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
    // podman run with these arguments, stdin given.
    ProcessResult podman(const std::vector<std::string>& args, const std::string& input = "") {
        std::vector<std::string> argv = podman_argv(dir.path());
        argv.insert(argv.end(), args.begin(), args.end());
        return run_process(argv, {{"HOME", "/root"}}, input);
    }
    TempDir dir;
};

// The helpers this build defines (tests/CMakeLists.txt): the image ships each
// (build-image.sh fails without one the source tree builds).
std::vector<std::string> built_helpers() {
    std::vector<std::string> out;
    std::istringstream names(SHMIPAM_SHIPPED_HELPERS);
    for (std::string h; names >> h;) out.push_back(h);
    return out;
}

// A request every helper refuses before anything else (another protocol version): code 1.
constexpr const char* kRefusedRequest = R"({"version": 999, "op": "claim-block"})";

void expect_refused(const ProcessResult& r, const std::string& what) {
    EXPECT_EQ(r.exit_code, 1) << what << ": " << r.out << r.err;
    const json answer = r.json();
    EXPECT_TRUE(answer.is_object() && answer.value("code", 0) == 1)
        << what << ": " << r.out << r.err;
}

// glibc's own libraries: what a host brings (deploy/build-image.sh leaves them out of
// shmipam-lib/).
bool is_glibc(const std::string& base) {
    static const std::regex glibc(
        R"((ld-linux.*|libc|libm|libmvec|libpthread|libdl|librt|libresolv|libanl|libutil|libnss_.*)\.so\..*)");
    return std::regex_match(base, glibc);
}

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

TEST_F(InstallImage, TheHelpersRunInTheImageAndInstalledOnAHostThatHasOnlyGlibc) {
    const std::string build_dir = std::filesystem::path(SHMIPAM_PLUGIN_PATH).parent_path().string();
    const std::vector<std::string> helpers = built_helpers();
    ASSERT_FALSE(helpers.empty()) << "this build defines no helper";
    auto built = run_process({"/bin/bash", SHMIPAM_SOURCE_DIR "/deploy/build-image.sh",
                              "--build-dir", build_dir, "--tag", "localhost/shmipam:e2e"},
                             {{"PODMAN_OPTS", podman_opts()}, {"HOME", "/root"}}, "");
    ASSERT_EQ(built.exit_code, 0) << built.out << built.err;
    // In the image: each helper loads (its libraries from /opt/shmipam/bin/shmipam-lib, glibc
    // from the image) and answers a request it refuses with an error JSON, code 1.
    for (const std::string& h : helpers) {
        expect_refused(podman({"run", "--rm", "-i", "--network", "none", "--entrypoint",
                               "/opt/shmipam/bin/" + h, "localhost/shmipam:e2e"},
                              kRefusedRequest),
                       h + " in the image");
    }
    // Installed onto the host: the helpers beside the plugin, their libraries beside them.
    auto installed = run_image("localhost/shmipam:e2e");
    ASSERT_EQ(installed.exit_code, 0) << installed.out << installed.err;
    const std::string bin = dir.sub("host/opt/cni/bin");
    for (const std::string& h : helpers) {
        EXPECT_EQ(read_file(bin + "/" + h), read_file(build_dir + "/" + h)) << h;
        EXPECT_NE(installed.out.find("installed /host/opt/cni/bin/" + h), std::string::npos)
            << installed.out;
    }
    ASSERT_TRUE(std::filesystem::exists(bin + "/shmipam-lib/libcurl.so.4"));
    // On this host, every library but glibc's comes from shmipam-lib/, libcurl's own
    // dependencies too (the RPATH serves them: a RUNPATH would not).
    auto ldd = run_process({"/usr/bin/ldd", bin + "/shmipam-cluster"}, {}, "");
    ASSERT_EQ(ldd.exit_code, 0) << ldd.err;
    std::istringstream lines(ldd.out);
    size_t from_lib_dir = 0;
    std::set<std::string> glibc_files;
    for (std::string line; std::getline(lines, line);) {
        std::smatch m;
        if (!std::regex_search(line, m, std::regex(R"((/\S+))"))) continue;
        const std::string path = m[1];
        const std::string base = std::filesystem::path(path).filename().string();
        if (is_glibc(base)) {
            glibc_files.insert(path);
            continue;
        }
        EXPECT_EQ(path, bin + "/shmipam-lib/" + base) << line;
        ++from_lib_dir;
    }
    EXPECT_GT(from_lib_dir, 10u) << ldd.out;  // libcurl, libssl, libnghttp2, ...
    // A host with glibc and nothing else (no libcurl, no libstdc++): a root file system of
    // glibc's files and the installed CNI bin directory. The installed helpers run there.
    const std::string host = dir.sub("bare-host");
    for (const std::string& f : glibc_files) {
        std::filesystem::create_directories(host + std::filesystem::path(f).parent_path().string());
        std::filesystem::copy_file(f, host + f);
    }
    std::filesystem::create_directories(host + "/opt/cni");
    std::filesystem::copy(bin, host + "/opt/cni/bin", std::filesystem::copy_options::recursive);
    for (const std::string& h : helpers) {
        expect_refused(podman({"run", "--rm", "-i", "--network", "none", "--rootfs", host,
                               "/opt/cni/bin/" + h},
                              kRefusedRequest),
                       h + " installed on a host with only glibc");
    }
}

}  // namespace
}  // namespace shmipam::testing
