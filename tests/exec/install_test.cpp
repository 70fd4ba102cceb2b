// shmipamctl install, as the install container runs it on a node (deploy/): the binaries copied
// in by a rename, the conflist written once and then left to the operator, a newer plugin
// never replaced silently, bad input refused before anything changes; the installed plugin
// serves an ADD.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "base/shipped_libraries.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class Install : public ::testing::Test {
  protected:
    void SetUp() override {
        for (const char* d : {"from", "bin", "net.d"}) fs::create_directories(dir.sub(d));
        fs::copy_file(SHMIPAM_PLUGIN_PATH, dir.sub("from/shmipam"));
        conf = json{{"cniVersion", "1.0.0"},
                    {"name", "pods"},
                    {"plugins", json::array({{{"type", "bridge"},
                                              {"bridge", "cni0"},
                                              {"ipam",
                                               {{"type", "shmipam"},
                                                {"subnet", "10.126.0.0/24"},
                                                {"runDir", dir.sub("run")},
                                                {"dataDir", dir.sub("data")}}}}})}};
        write_file(dir.sub("10-pods.conflist"), conf.dump(2));
    }
    ProcessResult install(std::vector<std::string> extra = {}) {
        std::vector<std::string> args{
            "install",        "--from",       dir.sub("from"),
            "--cni-bin-dir",  dir.sub("bin"), "--cni-conf-dir",
            dir.sub("net.d"), "--conf",       dir.sub("10-pods.conflist")};
        args.insert(args.end(), extra.begin(), extra.end());
        return run_ctl(args);
    }
    // A stand-in for another release's plugin: only its version stamp matters to install.
    void put_installed(const std::string& version) {
        write_file(dir.sub("bin/shmipam"),
                   "\x7f"
                   "ELF...shmipam-build-version:" +
                       version + "\n");
    }
    TempDir dir;
    json conf;
};

TEST_F(Install, CopiesThePluginAndWritesTheConflistAndTheInstalledPluginServesAnAdd) {
    auto r = install();
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(read_file(dir.sub("bin/shmipam")), read_file(SHMIPAM_PLUGIN_PATH));
    struct stat st {};
    ASSERT_EQ(::stat(dir.sub("bin/shmipam").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0755u);
    EXPECT_EQ(json::parse(read_file(dir.sub("net.d/10-pods.conflist"))), conf);
    // No temporary file left beside them (the installers' lock file apart).
    for (const auto& e : fs::directory_iterator(dir.sub("bin"))) {
        const std::string name = e.path().filename().string();
        EXPECT_TRUE(name == "shmipam" || name == ".shmipam-install.lock") << name;
    }
    // The installed binary, driven as the bridge plugin would, with the installed conflist's
    // plugin config.
    json plugin = conf["plugins"][0];
    plugin["cniVersion"] = "1.0.0";
    plugin["name"] = "pods";
    auto add = run_process({dir.sub("bin/shmipam")}, cni_env("ADD", "c1"), plugin.dump());
    ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
    EXPECT_EQ(add.json()["ips"][0]["address"], "10.126.0.2/24");
}

TEST_F(Install, ASecondRunChangesNothingAndAnOperatorsConflistIsLeftAlone) {
    ASSERT_EQ(install().exit_code, 0);
    auto again = install();
    ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
    EXPECT_NE(again.out.find("unchanged " + dir.sub("bin/shmipam")), std::string::npos)
        << again.out;
    write_file(dir.sub("net.d/10-pods.conflist"), "{\"edited\": \"by the operator\"}");
    auto left = install();
    ASSERT_EQ(left.exit_code, 0) << left.out << left.err;
    EXPECT_NE(left.out.find("left " + dir.sub("net.d/10-pods.conflist")), std::string::npos)
        << left.out;
    EXPECT_EQ(read_file(dir.sub("net.d/10-pods.conflist")), "{\"edited\": \"by the operator\"}");
    ASSERT_EQ(install({"--force"}).exit_code, 0);
    EXPECT_EQ(read_file(dir.sub("net.d/10-pods.conflist")), "{\"edited\": \"by the operator\"}")
        << "--force (a downgrade) leaves the conflist alone";
    ASSERT_EQ(install({"--overwrite-conf"}).exit_code, 0);
    EXPECT_EQ(json::parse(read_file(dir.sub("net.d/10-pods.conflist"))), conf);
}

TEST_F(Install, ANewerInstalledPluginIsKeptUnlessForcedAndAnOlderOneIsReplaced) {
    put_installed("99.0.0");
    auto r = install();
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("99.0.0"), std::string::npos) << r.err;
    EXPECT_NE(read_file(dir.sub("bin/shmipam")), read_file(SHMIPAM_PLUGIN_PATH)) << "replaced";
    ASSERT_EQ(install({"--force"}).exit_code, 0);
    EXPECT_EQ(read_file(dir.sub("bin/shmipam")), read_file(SHMIPAM_PLUGIN_PATH));

    put_installed("0.0.1");
    ASSERT_EQ(install().exit_code, 0);
    EXPECT_EQ(read_file(dir.sub("bin/shmipam")), read_file(SHMIPAM_PLUGIN_PATH));
    // Unversioned (host-local's name reused, an old build): replaced.
    write_file(dir.sub("bin/shmipam"), "#!/bin/sh\n");
    ASSERT_EQ(install().exit_code, 0);
    EXPECT_EQ(read_file(dir.sub("bin/shmipam")), read_file(SHMIPAM_PLUGIN_PATH));
}

// Both helpers, with their shared libraries (shmipam-lib/, which their RPATH names): the
// libraries first, then the helpers, then the plugin; an unchanged library is not rewritten, a
// library no longer shipped is removed, and beside a newer helper that is kept its libraries
// are left alone.
TEST_F(Install, TheHelpersAndTheirLibrariesArePutInPlaceBeforeThePlugin) {
    for (const char* h : {"shmipam-cluster", "shmipam-kube"}) {
        write_file(dir.sub(std::string("from/") + h),
                   "\x7f"
                   "ELF...shmipam-build-version:0.1.0\n");
    }
    fs::create_directories(dir.sub("from/shmipam-lib"));
    write_file(dir.sub("from/shmipam-lib/libcurl.so.4"), "curl-1");
    write_file(dir.sub("from/shmipam-lib/libssl.so.3"), "ssl-1");
    write_file(dir.sub("from/shmipam-lib/") + kShippedLoader, "loader-1");
    auto r = install();
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const size_t libs = r.out.find("installed " + dir.sub("bin/shmipam-lib") + " (3 libraries");
    const size_t kube = r.out.find("installed " + dir.sub("bin/shmipam-kube"));
    const size_t plugin = r.out.find("installed " + dir.sub("bin/shmipam") + " ");
    ASSERT_NE(libs, std::string::npos) << r.out;
    ASSERT_NE(kube, std::string::npos) << r.out;
    EXPECT_LT(libs, kube) << r.out;
    EXPECT_LT(kube, plugin) << r.out;
    EXPECT_EQ(read_file(dir.sub("bin/shmipam-lib/libcurl.so.4")), "curl-1");
    EXPECT_EQ(read_file(dir.sub("bin/shmipam-kube")), read_file(dir.sub("from/shmipam-kube")));
    struct stat st {};
    ASSERT_EQ(::stat(dir.sub("bin/shmipam-lib/libssl.so.3").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0644u);
    // The loader is exec'd: the plugin starts each helper through it (base/shipped_libraries.h).
    ASSERT_EQ(::stat((dir.sub("bin/shmipam-lib/") + kShippedLoader).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0755u);
    const ino_t curl_inode = [&] {
        struct stat s {};
        ::stat(dir.sub("bin/shmipam-lib/libcurl.so.4").c_str(), &s);
        return s.st_ino;
    }();
    // The next release: one library changed, one gone.
    write_file(dir.sub("from/shmipam-lib/libssl.so.3"), "ssl-2");
    fs::remove(dir.sub("from/shmipam-lib/libcurl.so.4"));
    write_file(dir.sub("from/shmipam-lib/libcurl.so.5"), "curl-2");
    auto next = install();
    ASSERT_EQ(next.exit_code, 0) << next.out << next.err;
    EXPECT_EQ(read_file(dir.sub("bin/shmipam-lib/libssl.so.3")), "ssl-2");
    EXPECT_EQ(read_file(dir.sub("bin/shmipam-lib/libcurl.so.5")), "curl-2");
    EXPECT_FALSE(fs::exists(dir.sub("bin/shmipam-lib/libcurl.so.4"))) << next.out;
    // Again: nothing changes (the same inode).
    ASSERT_EQ(install().exit_code, 0);
    struct stat again {};
    ASSERT_EQ(::stat(dir.sub("bin/shmipam-lib/libcurl.so.5").c_str(), &again), 0);
    write_file(dir.sub("from/shmipam-lib/libcurl.so.5"), "curl-2");  // same bytes
    auto same = install();
    EXPECT_NE(same.out.find("unchanged " + dir.sub("bin/shmipam-lib")), std::string::npos)
        << same.out;
    struct stat after {};
    ASSERT_EQ(::stat(dir.sub("bin/shmipam-lib/libcurl.so.5").c_str(), &after), 0);
    EXPECT_EQ(after.st_ino, again.st_ino);
    EXPECT_NE(curl_inode, 0u);
    // A newer kube helper on the node is kept, and so are the libraries beside it.
    write_file(dir.sub("bin/shmipam-kube"),
               "\x7f"
               "ELF...shmipam-build-version:99.0.0\n");
    write_file(dir.sub("from/shmipam-lib/libssl.so.3"), "ssl-3");
    auto kept = install();
    EXPECT_EQ(kept.exit_code, 1) << kept.out << kept.err;
    EXPECT_EQ(read_file(dir.sub("bin/shmipam-lib/libssl.so.3")), "ssl-2");
}

// Cluster mode reads the node's name from the file the install container writes from the
// Node's spec.nodeName (ipam.nodeNameFile): never the host name.
TEST_F(Install, TheNodesNameIsWrittenForClusterModeAndABadOneIsRefused) {
    auto r =
        install({"--node-name", "worker-7.example", "--node-name-file", dir.sub("state/nodename")});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(read_file(dir.sub("state/nodename")), "worker-7.example\n");
    auto bad = install({"--node-name", "a/b", "--node-name-file", dir.sub("other/nodename")});
    EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
    struct stat st {};
    EXPECT_NE(::stat(dir.sub("other/nodename").c_str(), &st), 0);
}

TEST_F(Install, ABadConflistOrNoPluginIsRefusedBeforeAnythingChanges) {
    for (const std::string& bad :
         {std::string("not json"), std::string("[]"),
          json{{"name", "x"}, {"type", "bridge"}}.dump(),
          json{{"name", "x"},
               {"plugins", json::array({{{"type", "bridge"}, {"ipam", {{"type", "host-local"}}}}})}}
              .dump()}) {
        write_file(dir.sub("10-pods.conflist"), bad);
        auto r = install();
        EXPECT_EQ(r.exit_code, 2) << bad << "\n" << r.out;
        EXPECT_NE(r.err.find("10-pods.conflist"), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(dir.sub("bin/shmipam"))) << bad;
        EXPECT_TRUE(fs::is_empty(dir.sub("net.d"))) << bad;
    }
    fs::remove(dir.sub("from/shmipam"));
    write_file(dir.sub("10-pods.conflist"), conf.dump());
    auto r = install();
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("no shmipam in"), std::string::npos) << r.err;
    EXPECT_TRUE(fs::is_empty(dir.sub("net.d")));
}

}  // namespace
}  // namespace shmipam::testing
