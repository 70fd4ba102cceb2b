// shmipamctl kubeconfig with TokenRequest (tools/verbs/kubeconfig_token.h), against the API
// server's stand-in: the node's kubeconfig holds a token of the DaemonSet's service account
// bound to no pod, so ADDs that need the API keep working after the pod's projected token is
// revoked; where TokenRequest is refused the projected token is written and the output says so;
// a token on disk is never replaced by one that expires sooner, and is kept through
// TokenRequest failures while it lives. Run against both builds of shmipamctl.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "base/base64.h"
#include "tests/exec/shmipamctl_builds.h"
#include "tests/support/kube_standin.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kTokenPath = "/api/v1/namespaces/kube-system/serviceaccounts/shmipam/token";

// A JWT of the service account kube-system/shmipam, as the kubelet projects one (the stand-in
// does not verify signatures; shmipamctl reads only its subject).
std::string projected_jwt(const std::string& salt) {
    auto url = [](std::string b64) {
        for (char& c : b64) c = c == '+' ? '-' : c == '/' ? '_' : c;
        while (!b64.empty() && b64.back() == '=') b64.pop_back();
        return b64;
    };
    const json claims = {{"sub", "system:serviceaccount:kube-system:shmipam"},
                         {"kubernetes.io", {{"pod", {{"name", "shmipam-" + salt}}}}}};
    return url(base::base64_encode(R"({"alg":"RS256","kid":"test"})")) + "." +
           url(base::base64_encode(claims.dump())) + ".c2lnbmF0dXJl";
}

class KubeconfigToken : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        ASSERT_TRUE(api.ready()) << api.why_not_ready();
        projected = projected_jwt("abcde");
        api.set_token(projected);
        sa = dir.sub("serviceaccount");
        fs::create_directories(sa);
        fs::copy_file(api.ca_file(), sa + "/ca.crt");
        write_file(sa + "/token", projected);
        write_file(sa + "/namespace", "kube-system");
        out = dir.sub("net.d/shmipam.d/shmipam-kubeconfig");
    }
    ProcessResult run(const std::vector<std::string>& extra = {}) {
        std::vector<std::string> argv{GetParam(), "kubeconfig", "--service-account-dir",
                                      sa,         "--out",      out,
                                      "--server", api.server()};
        argv.insert(argv.end(), extra.begin(), extra.end());
        return run_process(argv, {}, "");
    }
    std::string token_on_disk() const {
        std::smatch m;
        const std::string text = read_file(out);
        return std::regex_search(text, m, std::regex(R"re(token: "([^"]+)")re")) ? m[1].str() : "";
    }
    // As if the renewal were due: the state line's `next` moved to the past.
    void make_renewal_due() {
        const std::string text = read_file(out);
        write_file(out, std::regex_replace(text, std::regex(R"(next=\d+)"), "next=0"));
    }
    size_t token_requests() const {
        size_t n = 0;
        for (const auto& q : api.requests()) n += q.method == "POST" && q.path == kTokenPath;
        return n;
    }
    TempDir dir;
    KubeStandin api;
    std::string projected, sa, out;
};

TEST_P(KubeconfigToken, ARequestedTokenOutlivesTheRevokedProjectedTokenAndServesAdds) {
    auto r = run();
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("wrote " + out + " (a requested token, valid until "), std::string::npos)
        << r.out;
    EXPECT_EQ(token_requests(), 1u);
    const std::string issued = token_on_disk();
    EXPECT_TRUE(issued.starts_with("standin-issued-")) << read_file(out);
    EXPECT_NE(read_file(out).find("# shmipam-token: source=requested expires="), std::string::npos);
    // Not due: the next round asks nothing.
    auto again = run();
    EXPECT_NE(again.out.find("unchanged " + out), std::string::npos) << again.out;
    EXPECT_EQ(token_requests(), 1u);
    // The DaemonSet's pod goes (a rolling update, an uninstall): its projected token is
    // refused from now on. The node's ADDs that need the API still work.
    api.set_token(projected_jwt("another-pod"));
    write_file(dir.sub("pools/pools.yaml"),
               "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
               "metadata: {name: db-pool}\nspec: {subnet: 10.62.0.0/24, ips: "
               "[\"10.62.0.10-10.62.0.20\"], default: true, podAffinity: {matchLabels: {app: "
               "db}}}\n");
    api.put_pod("default", "db-7f9c-abcde", "uid-1", {{"app", "db"}});
    const json cfg = {
        {"cniVersion", "1.1.0"},
        {"name", "net"},
        {"type", "bridge"},
        {"ipam",
         {{"type", "shmipam"},
          {"runDir", dir.sub("run")},
          {"dataDir", dir.sub("data")},
          {"poolsDir", dir.sub("pools")},
          {"nodeName", "node-a"},
          {"kubernetes",
           {{"kubeconfig", out}, {"budgetMs", 10'000}, {"connectTimeoutMs", 10'000}}}}}};
    auto add = run_plugin(cni_env("ADD", "c1", "eth0",
                                  "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME="
                                  "db-7f9c-abcde;K8S_POD_UID=uid-1"),
                          cfg.dump());
    ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
    EXPECT_NE(add.out.find("10.62.0."), std::string::npos) << add.out;
}

TEST_P(KubeconfigToken, WhereTokenRequestIsRefusedTheProjectedTokenIsWrittenAndSaidSo) {
    // A role without create on serviceaccounts/token.
    api.force_status(403, kTokenPath);
    auto r = run();
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("the pod's projected token, which dies with the pod (TokenRequest "
                         "failed: POST " +
                         api.server() + kTokenPath),
              std::string::npos)
        << r.out;
    EXPECT_EQ(token_on_disk(), projected);
    EXPECT_NE(read_file(out).find("# shmipam-token: source=projected next="), std::string::npos);
    // Asked again only after a while, not every round.
    auto again = run();
    EXPECT_NE(again.out.find("unchanged " + out), std::string::npos) << again.out;
    EXPECT_EQ(token_requests(), 1u);
    // Once the role allows it (and the retry is due), the requested token replaces it.
    api.clear_faults();
    make_renewal_due();
    auto allowed = run();
    EXPECT_NE(allowed.out.find("a requested token"), std::string::npos) << allowed.out;
    EXPECT_TRUE(token_on_disk().starts_with("standin-issued-"));
}

TEST_P(KubeconfigToken, ATokenOnDiskIsNeverReplacedByOneThatExpiresSoonerAndIsKeptThroughFailures) {
    ASSERT_EQ(run({"--token-lifetime", "7200"}).exit_code, 0);
    const std::string longer = token_on_disk();
    ASSERT_TRUE(longer.starts_with("standin-issued-"));
    // Another writer asks for an hour: its token expires before the one on disk.
    make_renewal_due();
    auto shorter = run({"--token-lifetime", "3600"});
    ASSERT_EQ(shorter.exit_code, 0) << shorter.err;
    EXPECT_NE(shorter.out.find("outlives the one just issued"), std::string::npos) << shorter.out;
    EXPECT_EQ(token_on_disk(), longer);
    EXPECT_EQ(token_requests(), 2u);
    // TokenRequest failing (the API server overloaded) keeps the token on disk while it lives.
    api.force_status(503, kTokenPath);
    make_renewal_due();
    auto failing = run({"--token-lifetime", "7200"});
    ASSERT_EQ(failing.exit_code, 0) << failing.err;
    EXPECT_NE(failing.out.find("the requested token on disk, valid until"), std::string::npos)
        << failing.out;
    EXPECT_NE(failing.out.find("TokenRequest failed"), std::string::npos) << failing.out;
    EXPECT_EQ(token_on_disk(), longer);
}

TEST_P(KubeconfigToken, ALifetimeShorterThanTheApiGrantsIsRefusedWritingNothing) {
    auto r = run({"--token-lifetime", "300"});
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.err.find("--token-lifetime 300 is shorter than the API server grants (600 s)"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(out));
    EXPECT_EQ(api.request_count(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Builds, KubeconfigToken, ::testing::ValuesIn(shmipamctls()), build_name);

}  // namespace
}  // namespace shmipam::testing
