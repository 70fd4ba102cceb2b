// The install image as a node runs it (deploy/): deploy/build-image.sh builds the FROM-scratch
// image with podman from this build, the image's entry point installs into temporary "host"
// directories mounted where the DaemonSet mounts the node's, and the installed plugin serves a
// real ADD with the installed conflist's config. The dynamic helpers the image ships run in
// the image, and, installed onto a "node" with their libraries, C library and loader, on a root
// file system that has no C library at all.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include "base/shipped_libraries.h"
#include "tests/e2e/e2e_support.h"
#include "tests/support/etcd_cluster.h"
#include "tests/support/kube_standin.h"
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
    std::string build_and_install();
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

// Builds the image from this build and runs it as the DaemonSet's init container does; the
// "host"'s CNI bin directory it installed into.
std::string InstallImage::build_and_install() {
    const std::string build_dir = std::filesystem::path(SHMIPAM_PLUGIN_PATH).parent_path().string();
    auto built = run_process({"/bin/bash", SHMIPAM_SOURCE_DIR "/deploy/build-image.sh",
                              "--build-dir", build_dir, "--tag", "localhost/shmipam:e2e"},
                             {{"PODMAN_OPTS", podman_opts()}, {"HOME", "/root"}}, "");
    EXPECT_EQ(built.exit_code, 0) << built.out << built.err;
    if (built.exit_code != 0) return "";
    auto installed = run_image("localhost/shmipam:e2e");
    EXPECT_EQ(installed.exit_code, 0) << installed.out << installed.err;
    if (installed.exit_code != 0) return "";
    return dir.sub("host/opt/cni/bin");
}

TEST_F(InstallImage, TheHelpersRunInTheImage) {
    const std::vector<std::string> helpers = built_helpers();
    ASSERT_FALSE(helpers.empty()) << "this build defines no helper";
    const std::string bin = build_and_install();
    ASSERT_FALSE(bin.empty());
    // In the image: each helper loads (its libraries from /opt/shmipam/bin/shmipam-lib, the
    // loader from the image) and answers a request it refuses with an error JSON, code 1.
    for (const std::string& h : helpers) {
        expect_refused(podman({"run", "--rm", "-i", "--network", "none", "--entrypoint",
                               "/opt/shmipam/bin/" + h, "localhost/shmipam:e2e"},
                              kRefusedRequest),
                       h + " in the image");
        EXPECT_EQ(read_file(bin + "/" + h),
                  read_file(std::filesystem::path(SHMIPAM_PLUGIN_PATH).parent_path() / h))
            << h;
    }
}

// What `objdump -p` and `readelf -l` say of an ELF file: the loader it asks the kernel for, the
// libraries it asks the loader for, and the glibc symbol versions it needs.
struct ElfNeeds {
    std::string interpreter;  // "" for none (static)
    std::vector<std::string> libraries;
    std::vector<std::string> glibc_needed;   // "2.34", ...: its version references
    std::vector<std::string> glibc_defined;  // what it defines (glibc's own files)
};

std::vector<std::string> glibc_versions_in(const std::string& text) {
    static const std::regex version(R"(GLIBC_(\d+\.\d+(\.\d+)?))");
    std::vector<std::string> out;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), version);
         it != std::sregex_iterator(); ++it) {
        out.push_back((*it)[1]);
    }
    return out;
}

ElfNeeds elf_needs(const std::string& path) {
    ElfNeeds n;
    const std::string headers = run_process({"/usr/bin/readelf", "-lW", path}, {}, "").out;
    std::smatch m;
    if (std::regex_search(headers, m, std::regex(R"(Requesting program interpreter: ([^\]]+)\])")))
        n.interpreter = m[1];
    const std::string dynamic = run_process({"/usr/bin/objdump", "-p", path}, {}, "").out;
    const std::regex needed(R"(NEEDED\s+(\S+))");
    for (auto it = std::sregex_iterator(dynamic.begin(), dynamic.end(), needed);
         it != std::sregex_iterator(); ++it) {
        n.libraries.push_back((*it)[1]);
    }
    // "Version definitions:" (what it defines), then "Version References:" (what it needs).
    const size_t refs = dynamic.find("Version References:");
    const size_t defs = dynamic.find("Version definitions:");
    if (refs != std::string::npos) n.glibc_needed = glibc_versions_in(dynamic.substr(refs));
    if (defs != std::string::npos) {
        n.glibc_defined = glibc_versions_in(dynamic.substr(
            defs, refs == std::string::npos || refs < defs ? std::string::npos : refs - defs));
    }
    return n;
}

// "2.17" < "2.34" as glibc versions.
bool older_glibc(const std::string& a, const std::string& b) {
    std::istringstream x(a), y(b);
    for (;;) {
        int p = -1, q = -1;
        char dot;
        if (!(x >> p)) p = -1;
        if (!(y >> q)) q = -1;
        if (p != q) return p < q;
        if (p < 0) return false;
        x >> dot;
        y >> dot;
    }
}

// The oldest glibc a node may have (RHEL 7, the oldest kubelet host still met): a file the host
// loads may ask it for nothing newer.
constexpr const char* kOldestHostGlibc = "2.17";

// Every ELF file install puts on a node asks the host for nothing newer than glibc 2.17, or for
// no C library at all: the plugin is static, the loader shipped in shmipam-lib/ is static, and
// every other file is loaded by that loader from shmipam-lib/, with the glibc shipped there.
TEST_F(InstallImage, EveryInstalledElfFileAsksTheHostForNoNewerGlibcThan2_17) {
    const std::string bin = build_and_install();
    ASSERT_FALSE(bin.empty());
    const std::string lib = bin + "/shmipam-lib";
    ASSERT_TRUE(std::filesystem::exists(lib + "/libc.so.6")) << "glibc is shipped";
    // The newest glibc version the shipped C library defines.
    std::string shipped_glibc = "0";
    for (const auto& v : elf_needs(lib + "/libc.so.6").glibc_defined) {
        if (older_glibc(shipped_glibc, v)) shipped_glibc = v;
    }
    size_t elf_files = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(bin)) {
        if (!e.is_regular_file() || read_file(e.path().string()).substr(0, 4) !=
                                        "\x7f"
                                        "ELF")
            continue;
        ++elf_files;
        const std::string path = e.path().string();
        const std::string name = e.path().filename().string();
        const ElfNeeds n = elf_needs(path);
        if (name == "shmipam" || name == kShippedLoader) {
            // exec'd by the kernel: the plugin by the runtime, the loader by the plugin.
            EXPECT_EQ(n.interpreter, "") << path << " asks the host for a loader";
            EXPECT_TRUE(n.libraries.empty()) << path << " asks for " << n.libraries[0];
            for (const auto& v : n.glibc_needed) {
                EXPECT_FALSE(older_glibc(kOldestHostGlibc, v)) << path << " needs glibc " << v;
            }
            continue;
        }
        // Loaded by the shipped loader: everything it asks for is in shmipam-lib/.
        if (!n.interpreter.empty()) {
            EXPECT_TRUE(std::filesystem::exists(
                lib + "/" + std::filesystem::path(n.interpreter).filename().string()))
                << path << ": its loader " << n.interpreter << " is not shipped";
        }
        for (const auto& l : n.libraries) {
            EXPECT_TRUE(std::filesystem::exists(lib + "/" + l)) << path << " needs " << l;
        }
        for (const auto& v : n.glibc_needed) {
            EXPECT_FALSE(older_glibc(shipped_glibc, v))
                << path << " needs glibc " << v << ", newer than the shipped " << shipped_glibc;
        }
    }
    EXPECT_GT(elf_files, 10u) << "the plugin, the helpers, libcurl, libssl, glibc, ...";
}

// The no-libc node's root file system, the plugin's files under it.
constexpr const char* kNodeKubeconfig = "/etc/cni/net.d/shmipam.d/shmipam-kubeconfig";
constexpr const char* kNodeEtcdDir = "/etc/shmipam/etcd";

// A node with no C library at all (Talos, Bottlerocket; or one whose glibc is older than the
// helpers'): a root file system of what install wrote and the three files name resolution
// reads. There the installed plugin serves ADDs whose helpers, started through the loader
// shipped with them, make real TLS requests by host name: the kube helper to the API stand-in
// (the pod's labels, known only to the API, choose its pool), the cluster helper to an etcd
// with TLS and client certificates (the node's first block claimed).
TEST_F(InstallImage, TheInstalledHelpersRunOnANodeWithNoCLibraryAndReachTheApiAndEtcdByName) {
    const std::string bin = build_and_install();
    ASSERT_FALSE(bin.empty());
    KubeStandin api;
    ASSERT_TRUE(api.ready()) << api.why_not_ready();
    EtcdCluster etcd(1, /*tls=*/true);
    ASSERT_TRUE(etcd.ready()) << etcd.why_not_ready();

    const std::string node = dir.sub("no-libc-node");
    std::filesystem::create_directories(node + "/opt/cni");
    std::filesystem::copy(bin, node + "/opt/cni/bin", std::filesystem::copy_options::recursive);
    std::filesystem::create_directories(node + "/etc");
    write_file(node + "/etc/hosts", std::string("127.0.0.1 localhost ") + KubeStandin::kHostName +
                                        " " + EtcdCluster::kHostName + "\n");
    write_file(node + "/etc/nsswitch.conf", "hosts: files dns\n");
    write_file(node + "/etc/resolv.conf", "nameserver 127.0.0.1\n");
    // Nothing there but what install wrote and /etc: no C library outside shmipam-lib/.
    for (const auto& e : std::filesystem::recursive_directory_iterator(node)) {
        const std::string rel = e.path().string().substr(node.size());
        EXPECT_TRUE(rel == "/opt" || rel.starts_with("/opt/cni") || rel.starts_with("/etc")) << rel;
    }
    // What the plugin's ADDs need, under /etc and /var.
    std::filesystem::create_directories(
        node + std::filesystem::path(kNodeKubeconfig).parent_path().string());
    KubeStandin::KubeconfigSpec by_name;
    by_name.server =
        "https://" + std::string(KubeStandin::kHostName) + ":" + std::to_string(api.port());
    std::filesystem::copy_file(api.write_kubeconfig("by-name", by_name), node + kNodeKubeconfig);
    std::filesystem::create_directories(node + kNodeEtcdDir);
    std::filesystem::copy_file(etcd.ca_file(), node + kNodeEtcdDir + "/ca.crt");
    std::filesystem::copy_file(etcd.client_cert(), node + kNodeEtcdDir + "/client.crt");
    std::filesystem::copy_file(etcd.client_key(), node + kNodeEtcdDir + "/client.key");
    std::filesystem::create_directories(node + "/etc/shmipam/pools");
    std::filesystem::create_directories(node + "/etc/shmipam/cluster-pools");
    std::filesystem::create_directories(node + "/var/lib/shmipam");
    write_file(node + "/etc/shmipam/pools/pools.yaml",
               "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
               "metadata: {name: db-pool}\nspec: {subnet: 10.60.0.0/24, ips: "
               "[\"10.60.0.10-10.60.0.20\"], default: true, podAffinity: {matchLabels: {app: "
               "db}}}\n---\napiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
               "metadata: {name: general}\nspec: {subnet: 10.61.0.0/24, ips: "
               "[\"10.61.0.10-10.61.0.200\"], default: true}\n");
    write_file(node + "/etc/shmipam/cluster-pools/pool.yaml",
               "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
               "metadata: {name: shared}\nspec: {subnet: 10.77.0.0/24, ips: "
               "[\"10.77.0.0-10.77.0.255\"], default: true}\n");

    // The installed plugin run in that root, on the host's network (the stand-in and etcd
    // listen on its loopback), with the node's /etc/hosts and no resolv.conf of podman's.
    auto add = [&](const json& config, const std::string& pod) {
        std::vector<std::string> argv = podman_argv(dir.path());
        for (const std::string& a :
             {std::string("run"),
              std::string("--rm"),
              std::string("-i"),
              std::string("--network"),
              std::string("host"),
              std::string("--no-hosts"),
              std::string("--dns"),
              std::string("none"),
              std::string("-e"),
              std::string("CNI_COMMAND=ADD"),
              std::string("-e"),
              "CNI_CONTAINERID=" + pod,
              std::string("-e"),
              std::string("CNI_NETNS=/var/run/netns/test"),
              std::string("-e"),
              std::string("CNI_IFNAME=eth0"),
              std::string("-e"),
              std::string("CNI_PATH=/opt/cni/bin"),
              std::string("-e"),
              "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=" + pod +
                  ";K8S_POD_INFRA_CONTAINER_ID=" + pod + ";K8S_POD_UID=uid-" + pod,
              std::string("--rootfs"),
              node,
              std::string("/opt/cni/bin/shmipam")}) {
            argv.push_back(a);
        }
        return run_process(argv, {{"HOME", "/root"}}, config.dump());
    };
    auto address_of = [](const ProcessResult& r) -> std::string {
        const json doc = r.json();
        return doc.contains("ips") && !doc["ips"].empty() ? doc["ips"][0]["address"] : "";
    };

    // The kube helper: the pod's labels come from the API, by name and over TLS.
    api.put_pod("default", "db-7f9c-abcde", "uid-db-7f9c-abcde", {{"app", "db"}});
    json with_api = {{"cniVersion", "1.1.0"},
                     {"name", "net"},
                     {"type", "bridge"},
                     {"ipam",
                      {{"type", "shmipam"},
                       {"runDir", "/var/lib/shmipam/run"},
                       {"dataDir", "/var/lib/shmipam/data"},
                       {"poolsDir", "/etc/shmipam/pools"},
                       {"nodeName", "node-a"},
                       {"kubernetes",
                        {{"kubeconfig", kNodeKubeconfig},
                         {"budgetMs", 10'000},
                         {"connectTimeoutMs", 10'000}}}}}};
    auto db = add(with_api, "db-7f9c-abcde");
    ASSERT_EQ(db.exit_code, 0) << db.out << db.err;
    EXPECT_TRUE(address_of(db).starts_with("10.60.0.")) << db.out;
    EXPECT_EQ(api.request_count(), 1u);

    // The cluster helper: a block from etcd, by name, over TLS with a client certificate.
    const std::string port = etcd.client_url(0).substr(etcd.client_url(0).rfind(':') + 1);
    json cluster = {
        {"cniVersion", "1.1.0"},
        {"name", "cluster-net"},
        {"type", "bridge"},
        {"ipam",
         {{"type", "shmipam"},
          {"runDir", "/var/lib/shmipam/cluster-run"},
          {"dataDir", "/var/lib/shmipam/cluster-data"},
          {"poolsDir", "/etc/shmipam/cluster-pools"},
          {"nodeName", "node-a"},
          {"blockSize", 28},
          {"etcd",
           {{"endpoints", {"https://" + std::string(EtcdCluster::kHostName) + ":" + port}},
            {"caFile", std::string(kNodeEtcdDir) + "/ca.crt"},
            {"certFile", std::string(kNodeEtcdDir) + "/client.crt"},
            {"keyFile", std::string(kNodeEtcdDir) + "/client.key"},
            {"budgetMs", 10'000}}}}}};
    auto blocked = add(cluster, "web-1");
    ASSERT_EQ(blocked.exit_code, 0) << blocked.out << blocked.err;
    EXPECT_TRUE(address_of(blocked).starts_with("10.77.0.")) << blocked.out;

    // Without the shipped loader the helper cannot start on this node, and the error says why
    // (exec's "No such file or directory" is of the loader, not of the helper, which is there).
    std::filesystem::remove(node + "/opt/cni/bin/shmipam-lib/" + kShippedLoader);
    api.put_pod("default", "db-7f9c-fghij", "uid-db-7f9c-fghij", {{"app", "db"}});
    auto unloadable = add(with_api, "db-7f9c-fghij");
    EXPECT_NE(unloadable.exit_code, 0) << unloadable.out;
    const std::string msg = unloadable.json().value("msg", "");
    EXPECT_NE(msg.find("/opt/cni/bin/shmipam-kube is there but cannot be started: its dynamic "
                       "loader " +
                       elf_needs(bin + "/shmipam-kube").interpreter + " is not on this host"),
              std::string::npos)
        << unloadable.out;
}

}  // namespace
}  // namespace shmipam::testing
