// shmipamctl kubeconfig, as the DaemonSet runs it: a fake service account in a temp dir (the
// kubelet's layout: files behind a `..data` symlink swapped on rotation), the kubeconfig for
// the host written from it and parsed back as YAML; written atomically with mode 0600, only
// when it changes; --every follows a rotated token; bad input refused with nothing written.
// Run against both builds of shmipamctl (the image's is the static one).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <yaml.h>

#include <filesystem>

#include "base/base64.h"
#include "tests/exec/shmipamctl_builds.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_for.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kCa =
    "-----BEGIN "
    "CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIBADAKBggqhkjOPQQDAjAjMSEwHwYDVQQDDBhrM3Mtc2Vy\n"
    "dmVyLWNhQDE3MDAwMDAwMDAwHhcNMjQwMTAxMDAwMDAwWhcNMzQwMTAxMDAwMDAw\n"
    "-----END CERTIFICATE-----\n";

// What each round says of the token it wrote with --token-lifetime 0.
const std::string kProjectedNote = " (the pod's projected token (--token-lifetime 0))\n";

// A YAML document as JSON (scalars as strings), with libyaml: what a kubeconfig reader sees.
json yaml_node(yaml_document_t& doc, int index) {
    yaml_node_t* n = yaml_document_get_node(&doc, index);
    if (n == nullptr) return nullptr;
    switch (n->type) {
        case YAML_SCALAR_NODE:
            return std::string(reinterpret_cast<const char*>(n->data.scalar.value),
                               n->data.scalar.length);
        case YAML_SEQUENCE_NODE: {
            json out = json::array();
            for (auto* i = n->data.sequence.items.start; i < n->data.sequence.items.top; ++i) {
                out.push_back(yaml_node(doc, *i));
            }
            return out;
        }
        case YAML_MAPPING_NODE: {
            json out = json::object();
            for (auto* p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; ++p) {
                out[yaml_node(doc, p->key).get<std::string>()] = yaml_node(doc, p->value);
            }
            return out;
        }
        default:
            return nullptr;
    }
}

json parse_yaml(const std::string& text) {
    yaml_parser_t parser;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()),
                                 text.size());
    yaml_document_t doc;
    json out;
    if (yaml_parser_load(&parser, &doc) != 0) {
        out = yaml_node(doc, 1);
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    return out;
}

// The entry of a kubeconfig list named `name`.
json named(const json& list, const std::string& name) {
    for (const auto& e : list) {
        if (e.value("name", "") == name) return e;
    }
    return nullptr;
}

ino_t inode_of(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

class Kubeconfig : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        sa = dir.sub("serviceaccount");
        out = dir.sub("host/etc/cni/net.d/shmipam.d/shmipam-kubeconfig");
        // The kubelet's projected volume: the files in a timestamped directory, `..data`
        // pointing at it, each name a symlink through `..data`.
        fs::create_directories(sa);
        project("..2024_01_01_00_00_00.1", "token-one");
        fs::create_directory_symlink("..2024_01_01_00_00_00.1", sa + "/..data");
        for (const char* f : {"ca.crt", "token", "namespace"}) {
            fs::create_symlink(std::string("..data/") + f, sa + "/" + f);
        }
    }
    void project(const std::string& name, const std::string& token) {
        fs::create_directory(sa + "/" + name);
        write_file(sa + "/" + name + "/ca.crt", kCa);
        write_file(sa + "/" + name + "/token", token);
        write_file(sa + "/" + name + "/namespace", "kube-system");
    }
    // A rotation as the kubelet's atomic writer does it: the new files in a new directory,
    // a new symlink renamed over `..data`, the old directory removed.
    void rotate(const std::string& name, const std::string& token) {
        const std::string old = fs::read_symlink(sa + "/..data").string();
        project(name, token);
        fs::create_directory_symlink(name, sa + "/..data_tmp");
        fs::rename(sa + "/..data_tmp", sa + "/..data");
        fs::remove_all(sa + "/" + old);
    }
    std::vector<std::string> argv(std::vector<std::string> extra) const {
        // The projected token as it is: these tests are about the file (TokenRequest:
        // KubeconfigToken below).
        std::vector<std::string> a{GetParam(), "kubeconfig", "--service-account-dir", sa,
                                   "--out",    out,          "--token-lifetime",      "0"};
        a.insert(a.end(), extra.begin(), extra.end());
        return a;
    }
    ProcessResult run(std::vector<std::string> extra = {"--server", "https://10.96.0.1:443"},
                      const std::map<std::string, std::string>& env = {}) {
        return run_process(argv(std::move(extra)), env, "");
    }
    TempDir dir;
    std::string sa, out;
};

TEST_P(Kubeconfig, WritesOneClusterUserAndContextFromTheServiceAccountWithMode0600) {
    auto r = run();
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(r.out, "wrote " + out + kProjectedNote);
    struct stat st {};
    ASSERT_EQ(::stat(out.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    const json k = parse_yaml(read_file(out));
    ASSERT_TRUE(k.is_object()) << read_file(out);
    EXPECT_EQ(k["apiVersion"], "v1");
    EXPECT_EQ(k["kind"], "Config");
    ASSERT_EQ(k["clusters"].size(), 1u);
    ASSERT_EQ(k["users"].size(), 1u);
    ASSERT_EQ(k["contexts"].size(), 1u);
    // Followed as a kubeconfig reader does: current-context -> its cluster and user.
    const json context = named(k["contexts"], k["current-context"].get<std::string>());
    ASSERT_TRUE(context.is_object()) << k.dump(2);
    EXPECT_EQ(context["context"]["namespace"], "kube-system");
    const json cluster = named(k["clusters"], context["context"]["cluster"].get<std::string>());
    const json user = named(k["users"], context["context"]["user"].get<std::string>());
    ASSERT_TRUE(cluster.is_object() && user.is_object()) << k.dump(2);
    EXPECT_EQ(cluster["cluster"]["server"], "https://10.96.0.1:443");
    EXPECT_EQ(cluster["cluster"]["certificate-authority-data"], base::base64_encode(kCa));
    EXPECT_EQ(
        base::base64_decode(cluster["cluster"]["certificate-authority-data"].get<std::string>()),
        kCa);
    EXPECT_EQ(user["user"]["token"], "token-one");
    // Nothing but the kubeconfig in its directory (no temporary file left).
    for (const auto& e : fs::directory_iterator(fs::path(out).parent_path())) {
        EXPECT_EQ(e.path().string(), out);
    }
}

TEST_P(Kubeconfig, AnUnchangedKubeconfigIsNotRewrittenAndAChangedTokenIs) {
    ASSERT_EQ(run().exit_code, 0);
    const ino_t first = inode_of(out);
    auto again = run();
    ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
    EXPECT_EQ(again.out, "unchanged " + out + kProjectedNote);
    EXPECT_EQ(inode_of(out), first);
    rotate("..2024_01_01_01_00_00.2", "token-two\n");
    auto rotated = run();
    ASSERT_EQ(rotated.exit_code, 0) << rotated.out << rotated.err;
    EXPECT_EQ(rotated.out, "wrote " + out + kProjectedNote);
    EXPECT_NE(inode_of(out), first);  // renamed into place, not written over
    const json k = parse_yaml(read_file(out));
    EXPECT_EQ(k["users"][0]["user"]["token"], "token-two");
    struct stat st {};
    ASSERT_EQ(::stat(out.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST_P(Kubeconfig, TheServerComesFromThePodsEnvironmentWithAnIPv6HostBracketed) {
    auto r =
        run({}, {{"KUBERNETES_SERVICE_HOST", "fd00:10:96::1"}, {"KUBERNETES_SERVICE_PORT", "443"}});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(parse_yaml(read_file(out))["clusters"][0]["cluster"]["server"],
              "https://[fd00:10:96::1]:443");
    auto v4 =
        run({}, {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "6443"}});
    ASSERT_EQ(v4.exit_code, 0) << v4.out << v4.err;
    EXPECT_EQ(parse_yaml(read_file(out))["clusters"][0]["cluster"]["server"],
              "https://10.96.0.1:6443");
}

TEST_P(Kubeconfig, EveryFollowsATokenRotatedBySwappingTheDataSymlink) {
    // The loop's stderr goes to a file the test reads while it runs: a failed round says so.
    const std::string err = dir.sub("every.err");
    std::vector<std::string> sh{"/bin/sh", "-c", "exec \"$@\" 2>\"$0\"", err};
    for (auto& a : argv({"--server", "https://10.96.0.1:443", "--every", "1"})) sh.push_back(a);
    Child loop(sh, {}, "");
    auto token_is = [&](const std::string& want) {
        return wait_until([&] {
            return fs::exists(out) &&
                   parse_yaml(read_file(out))["users"][0]["user"]["token"] == want;
        });
    };
    EXPECT_TRUE(token_is("token-one"));
    const ino_t first = inode_of(out);
    // A round with nothing changed leaves the file alone. Every round reads the file before it
    // decides, so its second read from now on comes after a whole round ran.
    {
        OpenWatch reads(out);
        ASSERT_TRUE(reads.watching());
        EXPECT_TRUE(reads.wait_opens(2, [&] { return inode_of(out) != first; })) << "no round ran";
    }
    EXPECT_EQ(inode_of(out), first);
    rotate("..2024_01_01_01_00_00.2", "token-two");
    EXPECT_TRUE(token_is("token-two"));
    // A round that fails (the token gone) is said and retried, the loop goes on, and the
    // kubeconfig it wrote last stays.
    fs::remove(sa + "/..data");
    const auto said_it_failed = [&] {
        return read_file(err).find("cannot read " + sa + "/ca.crt") != std::string::npos;
    };
    EXPECT_TRUE(wait_until(said_it_failed)) << "no round failed: " << read_file(err);
    EXPECT_EQ(parse_yaml(read_file(out))["users"][0]["user"]["token"], "token-two");
    fs::create_directory_symlink("..2024_01_01_01_00_00.2", sa + "/..data");
    rotate("..2024_01_01_02_00_00.3", "token-three");
    EXPECT_TRUE(token_is("token-three"));
    ::kill(loop.pid(), SIGTERM);
    auto r = loop.wait();
    EXPECT_EQ(r.exit_code, 0) << r.out << read_file(err);
    EXPECT_NE(read_file(err).find("trying again"), std::string::npos) << read_file(err);
}

TEST_P(Kubeconfig, BadInputExitsTwoSayingWhatToFixAndWritesNothing) {
    // The token missing.
    fs::remove(sa + "/..2024_01_01_00_00_00.1/token");
    auto no_token = run();
    EXPECT_EQ(no_token.exit_code, 2) << no_token.out << no_token.err;
    EXPECT_NE(no_token.err.find(sa + "/token"), std::string::npos) << no_token.err;
    EXPECT_FALSE(fs::exists(out));
    EXPECT_FALSE(fs::exists(fs::path(out).parent_path()));
    write_file(sa + "/..2024_01_01_00_00_00.1/token", "t");
    // No server given, none in the environment.
    auto no_server = run({});
    EXPECT_EQ(no_server.exit_code, 2) << no_server.out << no_server.err;
    EXPECT_NE(no_server.err.find("--server"), std::string::npos) << no_server.err;
    EXPECT_FALSE(fs::exists(out));
    // Nor with --every: no round could ever succeed.
    auto no_server_every = run({"--every", "1"});
    EXPECT_EQ(no_server_every.exit_code, 2) << no_server_every.err;
    // No service account directory.
    auto no_sa = run_process({GetParam(), "kubeconfig", "--service-account-dir", dir.sub("nothing"),
                              "--out", out, "--server", "https://a:443"},
                             {}, "");
    EXPECT_EQ(no_sa.exit_code, 2) << no_sa.err;
    EXPECT_NE(no_sa.err.find("--service-account-dir"), std::string::npos) << no_sa.err;
    // An --out whose directory cannot be created (under a regular file).
    write_file(dir.sub("file"), "x");
    auto bad_out = run_process({GetParam(), "kubeconfig", "--service-account-dir", sa, "--out",
                                dir.sub("file/sub/kubeconfig"), "--server", "https://a:443"},
                               {}, "");
    EXPECT_EQ(bad_out.exit_code, 2) << bad_out.err;
    EXPECT_NE(bad_out.err.find("cannot create the directory " + dir.sub("file/sub")),
              std::string::npos)
        << bad_out.err;
    // A CA that is not PEM.
    write_file(sa + "/..2024_01_01_00_00_00.1/ca.crt", "not a certificate");
    auto bad_ca = run();
    EXPECT_EQ(bad_ca.exit_code, 2) << bad_ca.err;
    EXPECT_FALSE(fs::exists(out));
}

INSTANTIATE_TEST_SUITE_P(Builds, Kubeconfig, ::testing::ValuesIn(shmipamctls()), build_name);

}  // namespace
}  // namespace shmipam::testing
