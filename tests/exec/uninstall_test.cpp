// shmipamctl uninstall after shmipamctl install, in both builds (the image's is the static one):
// what install wrote goes, by its manifest, and nothing else; an edited conflist is kept unless
// forced; a node holding fixed-address claims is refused unless forced; the state goes only with
// --purge; a node installed before the manifest loses only what carries a build version; a
// rerun finishes a partial uninstall; bad input changes nothing. And the manifest's SHA-256
// against FIPS 180-4's vectors.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "base/sha256.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

TEST(Sha256, FipsVectors) {
    EXPECT_EQ(base::sha256_hex(""),
              "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(base::sha256_hex("abc"),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(base::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(base::sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                               "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
              "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    EXPECT_EQ(base::sha256_hex(std::string(1000000, 'a')),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    // Fed in pieces across block boundaries: the same.
    base::Sha256 s;
    const std::string a(1000000, 'a');
    for (size_t i = 0; i < a.size(); i += 77) s.update(std::string_view(a).substr(i, 77));
    std::string hex;
    for (uint8_t b : s.finish()) {
        static constexpr char kHex[] = "0123456789abcdef";
        hex += kHex[b >> 4];
        hex += kHex[b & 15];
    }
    EXPECT_EQ(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

std::set<std::string> names_in(const std::string& dir) {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
    return out;
}

class Uninstall : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        for (const char* d : {"from/shmipam-lib", "bin", "net.d"})
            fs::create_directories(dir.sub(d));
        fs::copy_file(SHMIPAM_PLUGIN_PATH, dir.sub("from/shmipam"));
        for (const char* h : {"shmipam-cluster", "shmipam-kube"}) {
            write_file(dir.sub(std::string("from/") + h),
                       "\x7f"
                       "ELF...shmipam-build-version:0.1.0\n");
        }
        write_file(dir.sub("from/shmipam-lib/libcurl.so.4"), "curl");
        write_file(dir.sub("from/shmipam-lib/libssl.so.3"), "ssl");
        plugin = {{"type", "bridge"},
                  {"bridge", "cni0"},
                  {"ipam",
                   {{"type", "shmipam"},
                    {"subnet", "10.127.0.0/24"},
                    {"reuseDelay", 0},
                    {"runDir", dir.sub("run")},
                    {"dataDir", dir.sub("data")}}}};
        conf = {{"cniVersion", "1.0.0"}, {"name", "pods"}, {"plugins", json::array({plugin})}};
        write_file(dir.sub("10-pods.conflist"), conf.dump(2));
        // Files of others in the same directories.
        write_file(dir.sub("bin/bridge"), "someone else's plugin");
        write_file(dir.sub("net.d/99-other.conflist"), "{\"name\": \"other\"}");
    }
    ProcessResult ctl(std::vector<std::string> args) {
        args.insert(args.begin(), GetParam());
        return run_process(args, {}, "");
    }
    void install() {
        auto r = ctl({"install", "--from", dir.sub("from"), "--cni-bin-dir", dir.sub("bin"),
                      "--cni-conf-dir", dir.sub("net.d"), "--conf", dir.sub("10-pods.conflist")});
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    }
    ProcessResult uninstall(std::vector<std::string> extra = {}) {
        std::vector<std::string> args{"uninstall", "--cni-bin-dir", dir.sub("bin"),
                                      "--cni-conf-dir", dir.sub("net.d")};
        args.insert(args.end(), extra.begin(), extra.end());
        return ctl(args);
    }
    // An ADD by the installed plugin: of StatefulSet pod shop/<pod> with a fixed address when
    // `fixed`.
    void add(const std::string& cid, bool fixed, const std::string& pod = "db-0") {
        json c = plugin;
        c["cniVersion"] = "1.0.0";
        c["name"] = "pods";
        if (fixed) {
            c["runtimeConfig"]["io.kubernetes.cri.pod-annotations"] = {
                {"ipam.shmipam.io/static-ip", "true"}};
            c["args"]["cni"]["labels"] =
                json::array({{{"key", "statefulset.kubernetes.io/pod-name"}, {"value", pod}}});
        }
        auto r = run_process({dir.sub("bin/shmipam")},
                             cni_env("ADD", cid, "eth0",
                                     "IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=" + pod +
                                         ";K8S_POD_UID=uid-" + cid),
                             c.dump());
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    }
    void expect_nothing_of_ours() {
        EXPECT_EQ(names_in(dir.sub("bin")), std::set<std::string>{"bridge"});
        EXPECT_EQ(names_in(dir.sub("net.d")), std::set<std::string>{"99-other.conflist"});
        EXPECT_EQ(read_file(dir.sub("bin/bridge")), "someone else's plugin");
    }
    std::string manifest() const { return dir.sub("net.d/shmipam.d/install-manifest.json"); }
    TempDir dir;
    json plugin, conf;
};

TEST_P(Uninstall, InstallRecordsWhatItWroteAndUninstallRemovesItAndNothingElse) {
    install();
    const json m = json::parse(read_file(manifest()));
    EXPECT_EQ(m["version"], "0.1.0");
    std::set<std::string> listed;
    for (const auto& f : m["files"]) {
        listed.insert(f["dir"].get<std::string>() + ":" + f["path"].get<std::string>());
        const std::string base = f["dir"] == "bin" ? dir.sub("bin/") : dir.sub("net.d/");
        EXPECT_EQ(f["sha256"], base::sha256_hex(read_file(base + f["path"].get<std::string>())));
    }
    EXPECT_EQ(listed,
              (std::set<std::string>{"bin:shmipam", "bin:shmipam-cluster", "bin:shmipam-kube",
                                     "bin:shmipam-lib/libcurl.so.4", "bin:shmipam-lib/libssl.so.3",
                                     "conf:10-pods.conflist"}));
    add("c1", false);
    auto r = uninstall();
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    expect_nothing_of_ours();
    EXPECT_NE(r.out.find("left the state in " + dir.sub("run")), std::string::npos) << r.out;
    EXPECT_TRUE(fs::exists(dir.sub("run/pods/index"))) << "the state stays without --purge";
    // The plugin went before its helpers, the helpers before their libraries.
    EXPECT_LT(r.out.find("removed " + dir.sub("net.d/10-pods.conflist")),
              r.out.find("removed " + dir.sub("bin/shmipam ")));
    EXPECT_LT(r.out.find("removed " + dir.sub("bin/shmipam\n")),
              r.out.find("removed " + dir.sub("bin/shmipam-kube")))
        << r.out;
    EXPECT_LT(r.out.find("removed " + dir.sub("bin/shmipam-cluster")),
              r.out.find("removed " + dir.sub("bin/shmipam-lib/")))
        << r.out;
}

// A binary replaced since by another shmipam build is still shmipam's; a library changed by
// hand is kept like the conflist.
TEST_P(Uninstall, AnEditedConflistIsKeptUnlessForced) {
    install();
    write_file(dir.sub("net.d/10-pods.conflist"), "{\"edited\": true}");
    write_file(dir.sub("bin/shmipam-cluster"),
               "\x7f"
               "ELF...shmipam-build-version:0.0.9\n");
    write_file(dir.sub("bin/shmipam-lib/libssl.so.3"), "patched by hand");
    auto r = uninstall();
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_FALSE(fs::exists(dir.sub("bin/shmipam-cluster"))) << r.out;
    EXPECT_EQ(read_file(dir.sub("bin/shmipam-lib/libssl.so.3")), "patched by hand") << r.out;
    EXPECT_NE(r.out.find("kept " + dir.sub("net.d/10-pods.conflist") + " (changed since install"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(read_file(dir.sub("net.d/10-pods.conflist")), "{\"edited\": true}");
    EXPECT_FALSE(fs::exists(dir.sub("bin/shmipam")));
    EXPECT_TRUE(fs::exists(manifest())) << "kept: it lists what was kept";
    auto forced = uninstall({"--force"});
    ASSERT_EQ(forced.exit_code, 0) << forced.out << forced.err;
    EXPECT_NE(forced.out.find("already gone " + dir.sub("bin/shmipam")), std::string::npos)
        << forced.out;
    expect_nothing_of_ours();
}

TEST_P(Uninstall, RefusedWhileTheNodeHoldsAFixedClaimUnlessForced) {
    install();
    add("c1", true, "db-0");
    add("c2", false, "web-1");
    auto r = uninstall();
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("1 fixed-address claim "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("sts:shop/db-0/eth0"), std::string::npos) << r.err;
    EXPECT_TRUE(fs::exists(dir.sub("bin/shmipam"))) << "nothing removed";
    EXPECT_TRUE(fs::exists(dir.sub("net.d/10-pods.conflist")));
    EXPECT_TRUE(fs::exists(manifest()));
    auto forced = uninstall({"--force"});
    ASSERT_EQ(forced.exit_code, 0) << forced.out << forced.err;
    EXPECT_NE(forced.out.find("forced: 1 fixed-address claim"), std::string::npos) << forced.out;
    expect_nothing_of_ours();
    EXPECT_TRUE(fs::exists(dir.sub("run/pods/index"))) << "the claim stays in the state";
}

TEST_P(Uninstall, PurgeRemovesTheStateAndOnlyShmipamsFiles) {
    install();
    add("c1", false);
    ASSERT_TRUE(fs::exists(dir.sub("run/pods/index")));
    ASSERT_TRUE(fs::exists(dir.sub("data/pods")));
    write_file(dir.sub("data/pods/10.127.0.9"), "host-local's");  // host-local shares it
    write_file(dir.sub("data/notes.txt"), "the operator's");
    auto r = uninstall({"--purge"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    expect_nothing_of_ours();
    EXPECT_FALSE(fs::exists(dir.sub("run"))) << r.out;
    EXPECT_EQ(names_in(dir.sub("data")), (std::set<std::string>{"notes.txt", "pods"})) << r.out;
    EXPECT_EQ(names_in(dir.sub("data/pods")), std::set<std::string>{"10.127.0.9"}) << r.out;
    EXPECT_NE(r.out.find("left " + dir.sub("data/notes.txt")), std::string::npos) << r.out;
}

TEST_P(Uninstall, ANodeInstalledBeforeTheManifestLosesOnlyVersionedBinaries) {
    install();
    fs::remove_all(dir.sub("net.d/shmipam.d"));
    write_file(dir.sub("bin/shmipam-kube"), "#!/bin/sh\n");  // no build version
    auto r = uninstall();
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_FALSE(fs::exists(dir.sub("bin/shmipam")));
    EXPECT_FALSE(fs::exists(dir.sub("bin/shmipam-cluster")));
    EXPECT_FALSE(fs::exists(dir.sub("bin/shmipam-lib")));
    EXPECT_TRUE(fs::exists(dir.sub("bin/shmipam-kube")));
    EXPECT_NE(r.out.find("left " + dir.sub("bin/shmipam-kube") + " (no shmipam build version"),
              std::string::npos)
        << r.out;
    EXPECT_TRUE(fs::exists(dir.sub("net.d/10-pods.conflist")));
    EXPECT_NE(r.out.find("left " + dir.sub("net.d/10-pods.conflist")), std::string::npos) << r.out;
    // Nothing versioned left and no manifest: nothing known to be ours.
    auto again = uninstall();
    EXPECT_EQ(again.exit_code, 2) << again.out << again.err;
    EXPECT_NE(again.err.find("no install manifest"), std::string::npos) << again.err;
    EXPECT_TRUE(fs::exists(dir.sub("bin/shmipam-kube")));
}

TEST_P(Uninstall, ARerunFinishesAPartialUninstall) {
    install();
    // As a run killed after removing the conflist and the plugin: the manifest is still there.
    fs::remove(dir.sub("net.d/10-pods.conflist"));
    fs::remove(dir.sub("bin/shmipam"));
    auto r = uninstall();
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("already gone " + dir.sub("bin/shmipam")), std::string::npos) << r.out;
    expect_nothing_of_ours();
}

TEST_P(Uninstall, BadInputIsRefusedWithNothingChanged) {
    install();
    const auto bin_before = names_in(dir.sub("bin"));
    const auto conf_before = names_in(dir.sub("net.d"));
    const std::string good = read_file(manifest());
    auto unchanged = [&](const ProcessResult& r, const std::string& what) {
        EXPECT_EQ(r.exit_code, 2) << what << "\n" << r.out << r.err;
        EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
        EXPECT_EQ(names_in(dir.sub("bin")), bin_before) << what;
        EXPECT_EQ(names_in(dir.sub("net.d")), conf_before) << what;
        EXPECT_TRUE(fs::exists(dir.sub("bin/shmipam-lib/libssl.so.3"))) << what;
    };
    unchanged(
        ctl({"uninstall", "--cni-bin-dir", dir.sub("nope"), "--cni-conf-dir", dir.sub("net.d")}),
        "no directory " + dir.sub("nope"));
    unchanged(uninstall({"--run-dir", dir.sub("no-run")}), "no directory " + dir.sub("no-run"));
    unchanged(uninstall({"--data-dir", dir.sub("no-data")}), "no directory " + dir.sub("no-data"));
    unchanged(uninstall({"--no-such-flag"}), "");
    for (const json& entry :
         {json{{"dir", "bin"}, {"path", "../net.d/99-other.conflist"}},
          json{{"dir", "conf"}, {"path", "../bin/bridge"}},
          json{{"dir", "bin"}, {"path", "bridge"}}, json{{"dir", "/etc"}, {"path", "passwd"}},
          json{{"dir", "bin"}, {"path", "shmipam-lib/../bridge"}}}) {
        json m = json::parse(good);
        json e = entry;
        e["sha256"] = base::sha256_hex(read_file(dir.sub("bin/bridge")));
        m["files"].push_back(e);
        write_file(manifest(), m.dump());
        unchanged(uninstall({"--force"}), "(refused)");
    }
    write_file(manifest(), "not json");
    unchanged(uninstall(), "is not a JSON object");
    write_file(manifest(), good);
    auto r = uninstall();
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    expect_nothing_of_ours();
}

std::vector<std::string> shmipamctls() {
    std::vector<std::string> out{SHMIPAMCTL_PATH};
#ifdef SHMIPAMCTL_STATIC_PATH
    out.push_back(SHMIPAMCTL_STATIC_PATH);
#endif
    return out;
}

INSTANTIATE_TEST_SUITE_P(Builds, Uninstall, ::testing::ValuesIn(shmipamctls()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                             return i.param.ends_with("-static") ? std::string("Static")
                                                                 : std::string("Dynamic");
                         });

}  // namespace
}  // namespace shmipam::testing
