// The Kubernetes helper as the plugin execs it (tools/kube_helper.cpp): a fresh process, the
// typed request of kube/pod_protocol.h on stdin, against the API server's stand-in on loopback
// (tests/support/kube_standin.h: HTTPS, bearer tokens, client certificates, Status bodies).
// What it answers, and the code of every failure: 7 for what a person must fix (the kubeconfig,
// the credentials, RBAC, TLS trust), 11 for what a later try may find mended.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "kube/pod_protocol.h"
#include "tests/support/http_proxy.h"
#include "tests/support/kube_standin.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;
namespace protocol = kube::protocol;

// The budget of a run a test expects an answer from: the tests of the budget pass their own, and
// a TLS exchange with the stand-in on a loaded machine must not fail for it.
constexpr uint64_t kAnswerBudgetMs = 10'000;
// What a run takes beyond its budget (docs/kubernetes.md: "within the budget plus a second"):
// the helper's start (a dynamically linked process: tens of milliseconds of CPU on a slow
// machine), its request and kubeconfig read before the budget starts, and its exit.
constexpr uint64_t kPastTheBudgetMs = 1000;

class KubeHelper : public ::testing::Test {
  protected:
    void SetUp() override { ASSERT_TRUE(api.ready()) << api.why_not_ready(); }

    // A connection may take the whole budget: the tests of the connect timeout pass their own.
    protocol::Api with(const std::string& kubeconfig, uint64_t budget_ms = kAnswerBudgetMs) const {
        return protocol::Api{kubeconfig, budget_ms, budget_ms};
    }
    ProcessResult read_pod(const std::string& ns, const std::string& name,
                           const std::string& kubeconfig = "",
                           uint64_t budget_ms = kAnswerBudgetMs) {
        return helper(protocol::encode(protocol::ReadPod{
            with(kubeconfig.empty() ? api.kubeconfig() : kubeconfig, budget_ms), ns, name}));
    }
    ProcessResult read_sets(const std::vector<protocol::ObjectRef>& sets,
                            const std::string& kubeconfig = "") {
        return helper(protocol::encode(protocol::ReadStatefulSets{
            with(kubeconfig.empty() ? api.kubeconfig() : kubeconfig), sets}));
    }
    // SHMIPAM_KUBE_HELPER in the environment runs another build's helper (the debug preset's,
    // under ASan and UBSan) through these tests.
    ProcessResult helper(const std::string& text,
                         const std::map<std::string, std::string>& env = {}) {
        const char* other = std::getenv("SHMIPAM_KUBE_HELPER");
        return run_process({other != nullptr ? other : SHMIPAM_KUBE_HELPER_PATH}, env, text);
    }
    // An error answer: exit 1 and {"code", "msg"} on stdout.
    static int code_of(const ProcessResult& r) {
        EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
        const json j = r.json();
        return j.is_object() && j.contains("code") ? j["code"].get<int>() : -1;
    }
    static std::string msg_of(const ProcessResult& r) {
        const json j = r.json();
        return j.is_object() && j.contains("msg") ? j["msg"].get<std::string>() : r.out;
    }
    std::string pod_url(const std::string& ns, const std::string& name) const {
        return api.server() + "/api/v1/namespaces/" + ns + "/pods/" + name;
    }

    KubeStandin api;
};

TEST_F(KubeHelper, ReadPodAnswersItsUidLabelsAnnotationsOwnersAndNode) {
    api.put_pod("shop", "db-0", "0b9e-uid", {{"app", "db"}, {"tier", "back"}},
                {{"ipam.spidernet.io/ippool", "{\"ipv4\":[\"pool-a\"]}"}},
                {{"apps/v1", "StatefulSet", "db", "sts-uid", true},
                 {"v1", "ConfigMap", "keeper", "cm-uid", false}},
                "worker-3");
    auto r = read_pod("shop", "db-0");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    auto pod = protocol::pod_answer(r.out);
    ASSERT_TRUE(pod) << pod.error().msg;
    EXPECT_EQ(pod->uid, "0b9e-uid");
    EXPECT_EQ(pod->node_name, "worker-3");
    EXPECT_EQ(pod->labels, (protocol::StringMap{{"app", "db"}, {"tier", "back"}}));
    EXPECT_EQ(pod->annotations.at("ipam.spidernet.io/ippool"), "{\"ipv4\":[\"pool-a\"]}");
    ASSERT_EQ(pod->owners.size(), 2u);
    EXPECT_EQ(pod->owners[0].api_version, "apps/v1");
    EXPECT_EQ(pod->owners[0].kind, "StatefulSet");
    EXPECT_EQ(pod->owners[0].name, "db");
    EXPECT_EQ(pod->owners[0].uid, "sts-uid");
    EXPECT_TRUE(pod->owners[0].controller);
    EXPECT_EQ(pod->owners[1].kind, "ConfigMap");
    EXPECT_FALSE(pod->owners[1].controller) << "the API server leaves a false controller out";
    const auto reqs = api.requests();
    ASSERT_EQ(reqs.size(), 1u);
    EXPECT_EQ(reqs[0].method, "GET");
    EXPECT_EQ(reqs[0].path, "/api/v1/namespaces/shop/pods/db-0");
    EXPECT_EQ(reqs[0].status, 200);
}

// insecure-skip-tls-verify is allowed, as kubectl allows it, and warned about on every run
// (the helper's stderr is the plugin's: the runtime logs it).
TEST_F(KubeHelper, AnInsecureKubeconfigWorksAndIsWarnedAboutOnEveryRun) {
    api.put_pod("default", "web-0", "uid-1");
    const std::string insecure = api.dir().sub("insecure-kubeconfig");
    write_file(insecure,
               "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n"
               "- name: c\n  context: {cluster: s, user: u}\nclusters:\n- name: s\n"
               "  cluster:\n    server: " +
                   api.server() +
                   "\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n"
                   "  user:\n    token: " +
                   api.token() + "\n");
    for (int run = 0; run < 2; ++run) {
        auto r = read_pod("default", "web-0", insecure);
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
        EXPECT_NE(r.err.find("warning: kubeconfig " + insecure +
                             " sets insecure-skip-tls-verify: the API server's certificate is "
                             "not verified"),
                  std::string::npos)
            << r.err;
    }
    // A verified kubeconfig says nothing.
    auto verified = read_pod("default", "web-0");
    EXPECT_EQ(verified.err, "");
}

// tls-server-name: the server reached at one name ("localhost", which the stand-in's
// certificate does not name) and its certificate checked against another (one it names).
TEST_F(KubeHelper, ATlsServerNameIsWhatTheCertificateIsCheckedAgainst) {
    api.put_pod("default", "web-0", "uid-1");
    const auto kubeconfig = [&](const std::string& sni) {
        const std::string path = api.dir().sub("kubeconfig-sni-" + std::to_string(sni.size()));
        write_file(path,
                   "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n"
                   "- name: c\n  context: {cluster: s, user: u}\nclusters:\n- name: s\n"
                   "  cluster:\n    server: https://localhost:" +
                       std::to_string(api.port()) +
                       "\n    certificate-authority: " + api.ca_file() + "\n" +
                       (sni.empty() ? "" : "    tls-server-name: " + sni + "\n") +
                       "users:\n- name: u\n  user:\n    token: " + api.token() + "\n");
        return path;
    };
    auto unnamed = read_pod("default", "web-0", kubeconfig(""));
    EXPECT_EQ(code_of(unnamed), 7) << unnamed.out;
    EXPECT_NE(msg_of(unnamed).find("TLS failed"), std::string::npos) << unnamed.out;
    auto named = read_pod("default", "web-0", kubeconfig(KubeStandin::kHostName));
    ASSERT_EQ(named.exit_code, 0) << named.out << named.err;
    EXPECT_EQ(protocol::pod_answer(named.out)->uid, "uid-1");
    // Messages still name the server the kubeconfig gives.
    api.force_status(503);
    auto failed = read_pod("default", "web-0", kubeconfig(KubeStandin::kHostName));
    EXPECT_NE(msg_of(failed).find("https://localhost:" + std::to_string(api.port())),
              std::string::npos)
        << failed.out;
}

TEST_F(KubeHelper, APodWithoutLabelsOwnersOrNodeAnswersThemEmpty) {
    api.put_pod("default", "bare", "uid-bare");
    auto r = read_pod("default", "bare");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    auto pod = protocol::pod_answer(r.out);
    ASSERT_TRUE(pod) << pod.error().msg;
    EXPECT_EQ(pod->uid, "uid-bare");
    EXPECT_TRUE(pod->labels.empty());
    EXPECT_TRUE(pod->annotations.empty());
    EXPECT_TRUE(pod->owners.empty());
    EXPECT_EQ(pod->node_name, "");
}

// One GET per set, in the order asked, over one connection; spec.replicas and
// spec.ordinals.start defaulted as the API server defaults them; a set not there is an answer.
TEST_F(KubeHelper, ReadStatefulSetsAnswersEachSetInOrderOverOneConnection) {
    api.put_statefulset("shop", "web", 3, 5);
    api.put_statefulset("shop", "db", std::nullopt, std::nullopt, /*deleting=*/true);
    api.put_statefulset("other", "cache", 0, std::nullopt);
    auto r = read_sets({{"shop", "web"}, {"shop", "gone"}, {"shop", "db"}, {"other", "cache"}});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    auto a = protocol::statefulsets_answer(r.out);
    ASSERT_TRUE(a) << a.error().msg;
    ASSERT_EQ(a->sets.size(), 4u);
    const auto& web = a->sets[0];
    EXPECT_EQ(web.namespace_ + "/" + web.name, "shop/web");
    EXPECT_TRUE(web.exists);
    EXPECT_FALSE(web.deleting);
    EXPECT_EQ(web.replicas, 3);
    EXPECT_EQ(web.ordinals_start, 5);
    const auto& gone = a->sets[1];
    EXPECT_EQ(gone.name, "gone");
    EXPECT_FALSE(gone.exists);
    const auto& db = a->sets[2];
    EXPECT_TRUE(db.exists);
    EXPECT_TRUE(db.deleting);
    EXPECT_EQ(db.replicas, 1) << "spec.replicas left out means 1";
    EXPECT_EQ(db.ordinals_start, 0) << "spec.ordinals left out means 0";
    EXPECT_EQ(a->sets[3].namespace_, "other");
    EXPECT_EQ(a->sets[3].replicas, 0) << "scaled to zero is not the default";
    const auto reqs = api.requests();
    ASSERT_EQ(reqs.size(), 4u);
    EXPECT_EQ(reqs[0].path, "/apis/apps/v1/namespaces/shop/statefulsets/web");
    EXPECT_EQ(reqs[1].status, 404);
    std::set<int> connections;
    for (const auto& q : reqs) connections.insert(q.client_port);
    EXPECT_EQ(connections.size(), 1u) << "one connection for the run's GETs";
}

// A recheck asks after its VMs' claims in the same run: KubeVirt's VirtualMachine objects.
TEST_F(KubeHelper, ReadStatefulSetsAnswersEachVmAfterTheSets) {
    api.put_statefulset("shop", "web", 3, std::nullopt);
    api.put_vm("shop", "vm1");
    api.put_vm("shop", "vm2", /*deleting=*/true);
    auto r = helper(protocol::encode(
        protocol::ReadStatefulSets{with(api.kubeconfig()),
                                   {{"shop", "web"}},
                                   {},
                                   {{"shop", "vm1"}, {"shop", "vm2"}, {"shop", "gone"}}}));
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    auto a = protocol::statefulsets_answer(r.out);
    ASSERT_TRUE(a) << a.error().msg;
    ASSERT_EQ(a->sets.size(), 1u);
    ASSERT_EQ(a->vms.size(), 3u) << r.out;
    EXPECT_TRUE(a->vms[0].exists);
    EXPECT_FALSE(a->vms[0].deleting);
    EXPECT_TRUE(a->vms[1].exists);
    EXPECT_TRUE(a->vms[1].deleting);
    EXPECT_FALSE(a->vms[2].exists);
    const auto reqs = api.requests();
    ASSERT_EQ(reqs.size(), 4u);
    EXPECT_EQ(reqs[1].path, "/apis/kubevirt.io/v1/namespaces/shop/virtualmachines/vm1");
    // A cluster without KubeVirt: its API server has no such path, and says so in no Status of
    // the VM: kept (11), never read as "the VM is gone".
    api.force_body("404 page not found", 404, "/apis/kubevirt.io/");
    auto absent = helper(protocol::encode(
        protocol::ReadStatefulSets{with(api.kubeconfig()), {}, {}, {{"shop", "vm1"}}}));
    EXPECT_EQ(code_of(absent), 11) << absent.out;
}

TEST_F(KubeHelper, APodNotThereIsTryAgainLaterNamingTheUrl) {
    auto r = read_pod("default", "web-0");
    EXPECT_EQ(code_of(r), 11) << r.out;
    EXPECT_NE(msg_of(r).find(pod_url("default", "web-0")), std::string::npos) << r.out;
    EXPECT_NE(msg_of(r).find("default/web-0"), std::string::npos) << r.out;
}

TEST_F(KubeHelper, AnUnknownTokenIs7NamingTheKubeconfigTheVerbAndTheResource) {
    api.put_pod("default", "web-0", "u");
    const std::string kc =
        api.write_kubeconfig("wrong-token", {.auth = KubeStandin::Auth::kToken, .token = "nope"});
    auto r = read_pod("default", "web-0", kc);
    EXPECT_EQ(code_of(r), 7) << r.out;
    const std::string m = msg_of(r);
    EXPECT_NE(m.find(kc), std::string::npos) << m;
    EXPECT_NE(m.find("get pods in namespace default"), std::string::npos) << m;
    EXPECT_NE(m.find("401 Unauthorized"), std::string::npos) << m;
    EXPECT_NE(m.find(pod_url("default", "web-0")), std::string::npos) << m;
}

TEST_F(KubeHelper, AForbiddenReadIs7InTheApiServersWords) {
    api.put_pod("default", "web-0", "u");
    api.put_statefulset("default", "web", 1, std::nullopt);
    api.forbid(api.token());
    auto pod = read_pod("default", "web-0");
    EXPECT_EQ(code_of(pod), 7) << pod.out;
    EXPECT_NE(msg_of(pod).find("forbids kubeconfig " + api.kubeconfig() +
                               " (user \"shmipam\") to get pods in namespace default"),
              std::string::npos)
        << pod.out;
    EXPECT_NE(msg_of(pod).find("User \"system:serviceaccount:kube-system:shmipam\" cannot get "
                               "resource \"pods\" in API group \"\" in the namespace \"default\""),
              std::string::npos)
        << pod.out;
    auto sets = read_sets({{"default", "web"}});
    EXPECT_EQ(code_of(sets), 7) << sets.out;
    EXPECT_NE(msg_of(sets).find("get statefulsets.apps in namespace default"), std::string::npos)
        << sets.out;
}

TEST_F(KubeHelper, AnApiServerAnswering5xxIsTryAgainLater) {
    api.put_pod("default", "web-0", "u");
    api.force_status(503);
    auto r = read_pod("default", "web-0");
    EXPECT_EQ(code_of(r), 11) << r.out;
    EXPECT_NE(msg_of(r).find("503 ServiceUnavailable"), std::string::npos) << r.out;
    EXPECT_EQ(api.request_count(), 1u) << "a 5xx without Retry-After is not asked again";
    api.force_status(500, "/apis/");
    auto sets = read_sets({{"default", "web"}});
    EXPECT_EQ(code_of(sets), 11) << sets.out;
    api.clear_faults();
    EXPECT_EQ(read_pod("default", "web-0").exit_code, 0);
}

TEST_F(KubeHelper, NoAnswerWithinTheBudgetIsTryAgainLaterWithinAboutTheBudget) {
    constexpr uint64_t kBudgetMs = 700;
    api.put_pod("default", "web-0", "u");
    api.set_delay(10'000);
    const auto start = std::chrono::steady_clock::now();
    auto r = read_pod("default", "web-0", "", kBudgetMs);
    const auto elapsed = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(code_of(r), 11) << r.out;
    EXPECT_NE(msg_of(r).find("700 ms"), std::string::npos) << r.out;
    EXPECT_LT(elapsed, std::chrono::milliseconds(kBudgetMs + kPastTheBudgetMs));
    EXPECT_GE(elapsed, std::chrono::milliseconds(kBudgetMs - 50));
}

// The budget is the whole run's: sets read one after the other share it.
TEST_F(KubeHelper, StatefulSetsShareOneBudget) {
    constexpr uint64_t kBudgetMs = 900;
    for (const char* s : {"a", "b", "c", "d"}) api.put_statefulset("default", s, 1, std::nullopt);
    api.set_delay(400, "/apis/");
    const auto start = std::chrono::steady_clock::now();
    auto r = helper(protocol::encode(protocol::ReadStatefulSets{
        with(api.kubeconfig(), kBudgetMs),
        {{"default", "a"}, {"default", "b"}, {"default", "c"}, {"default", "d"}}}));
    const auto elapsed = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(code_of(r), 11) << r.out;
    EXPECT_LT(elapsed, std::chrono::milliseconds(kBudgetMs + kPastTheBudgetMs));
}

TEST_F(KubeHelper, AnUnreachableApiServerIsTryAgainLaterAndItsReturnIsSeen) {
    api.put_pod("default", "web-0", "u");
    api.stop();
    auto r = read_pod("default", "web-0");
    EXPECT_EQ(code_of(r), 11) << r.out;
    EXPECT_NE(msg_of(r).find("unreachable"), std::string::npos) << r.out;
    EXPECT_NE(msg_of(r).find(pod_url("default", "web-0")), std::string::npos) << r.out;
    EXPECT_NE(msg_of(r).find("(sent 2 times)"), std::string::npos)
        << "a refused connection is tried once more: " << r.out;
    ASSERT_TRUE(api.start()) << api.why_not_ready();
    auto back = read_pod("default", "web-0");
    EXPECT_EQ(back.exit_code, 0) << back.out;
}

TEST_F(KubeHelper, BadKubeconfigsAre7NamingTheFileAndWhatIsWrong) {
    const std::string good = read_file(api.kubeconfig());
    auto edited = [&](const std::string& from, const std::string& to) {
        std::string s = good;
        const size_t at = s.find(from);
        EXPECT_NE(at, std::string::npos) << from;
        if (at != std::string::npos) s.replace(at, from.size(), to);
        return s;
    };
    struct Case {
        const char* name;
        std::string text;  // "" with missing: no file at all
        const char* said;
    };
    const std::vector<Case> cases = {
        {"missing", "", "cannot be read: No such file or directory"},
        {"bad-yaml", "clusters: [\n  - {name: a\n", "is not valid YAML"},
        {"no-current-context", edited("current-context: shmipam\n", ""), "has no current-context"},
        {"unknown-context", edited("current-context: shmipam", "current-context: elsewhere"),
         "context \"elsewhere\""},
        {"unknown-cluster", edited("    cluster: standin", "    cluster: nowhere"),
         "cluster \"nowhere\""},
        {"unknown-user", edited("    user: shmipam", "    user: nobody"), "user \"nobody\""},
        {"no-server", edited("    server: " + api.server() + "\n", ""), "has no server"},
        {"bad-base64",
         edited("certificate-authority-data: ", "certificate-authority-data: not-base64-"),
         "certificate-authority-data is not base64"},
        {"missing-ca-file",
         edited("certificate-authority-data: ", "certificate-authority: no-such.crt\n    x: "),
         "no-such.crt cannot be read"},
    };
    for (const Case& c : cases) {
        const std::string path = api.dir().sub(std::string("bad-") + c.name);
        if (!c.text.empty()) write_file(path, c.text);
        auto r = read_pod("default", "web-0", path);
        EXPECT_EQ(code_of(r), 7) << c.name << ": " << r.out;
        EXPECT_NE(msg_of(r).find("kubeconfig " + path), std::string::npos)
            << c.name << ": " << r.out;
        EXPECT_NE(msg_of(r).find(c.said), std::string::npos) << c.name << ": " << r.out;
    }
    EXPECT_EQ(api.request_count(), 0u) << "nothing asked of the API server";
}

// A misconfiguration, not a passing outage: 7, naming TLS and the kubeconfig's fields to check.
TEST_F(KubeHelper, AServerCertificateOfAnotherCaIs7NamingTheTlsFailure) {
    api.put_pod("default", "web-0", "u");
    for (auto ca : {KubeStandin::Ca::kOther, KubeStandin::Ca::kNone}) {
        const std::string kc = api.write_kubeconfig("other-ca", {.ca = ca});
        auto r = read_pod("default", "web-0", kc);
        EXPECT_EQ(code_of(r), 7) << r.out;
        EXPECT_NE(msg_of(r).find("TLS failed"), std::string::npos) << r.out;
        EXPECT_NE(msg_of(r).find("cluster \"standin\"'s certificate-authority does not verify"),
                  std::string::npos)
            << r.out;
        EXPECT_NE(msg_of(r).find(kc), std::string::npos) << r.out;
    }
    EXPECT_EQ(api.request_count(), 0u);
}

TEST_F(KubeHelper, AClientCertificateAuthenticates) {
    api.put_pod("default", "web-0", "u-cert");
    const std::string kc =
        api.write_kubeconfig("client-cert", {.auth = KubeStandin::Auth::kClientCert});
    auto r = read_pod("default", "web-0", kc);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(protocol::pod_answer(r.out)->uid, "u-cert");
    api.forbid(KubeStandin::kClientCertUser);
    auto refused = read_pod("default", "web-0", kc);
    EXPECT_EQ(code_of(refused), 7) << refused.out;
    EXPECT_NE(msg_of(refused).find("User \"shmipam-node\""), std::string::npos) << refused.out;
}

TEST_F(KubeHelper, AClientKeyThatIsNotTheCertificatesIs7NamingTheUsersFields) {
    api.put_pod("default", "web-0", "u");
    const std::string kc =
        api.write_kubeconfig("wrong-key", {.auth = KubeStandin::Auth::kClientCertOtherKey});
    auto r = read_pod("default", "web-0", kc);
    EXPECT_EQ(code_of(r), 7) << r.out;
    EXPECT_NE(msg_of(r).find("user \"shmipam\"'s client-certificate and client-key"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(api.request_count(), 0u);
}

TEST_F(KubeHelper, NoCredentialsAtAllAreUnauthorized) {
    api.put_pod("default", "web-0", "u");
    auto r = read_pod("default", "web-0",
                      api.write_kubeconfig("anonymous", {.auth = KubeStandin::Auth::kNone}));
    EXPECT_EQ(code_of(r), 7) << r.out;
    EXPECT_NE(msg_of(r).find("401 Unauthorized"), std::string::npos) << r.out;
}

// The kubeconfig is read on every run: `shmipamctl kubeconfig` rewriting it with a rotated token
// is what the next run uses, while the old token is refused.
TEST_F(KubeHelper, ARotatedTokenInTheRewrittenKubeconfigIsUsedByTheNextRun) {
    api.put_pod("default", "web-0", "u");
    ASSERT_EQ(read_pod("default", "web-0").exit_code, 0);
    const std::string old = api.token();
    const std::string old_kc = api.write_kubeconfig("old", {.token = old});
    api.rotate_token();
    EXPECT_EQ(code_of(read_pod("default", "web-0", old_kc)), 7) << "the old token is refused";
    auto r = read_pod("default", "web-0");
    EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST_F(KubeHelper, ATokenFileIsReadOnEveryRunAndRelativeCaFilesBesideTheKubeconfig) {
    api.put_pod("default", "web-0", "u");
    const std::string kc = api.write_kubeconfig(
        "token-file", {.auth = KubeStandin::Auth::kTokenFile, .ca = KubeStandin::Ca::kFile});
    ASSERT_EQ(read_pod("default", "web-0", kc).exit_code, 0);
    api.rotate_token();  // rewrites the token file, not this kubeconfig
    auto r = read_pod("default", "web-0", kc);
    EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST_F(KubeHelper, ARequestOfAnotherVersionOrAnUnknownOpIsRefusedWithCode1AndAsksNothing) {
    api.put_pod("default", "web-0", "u");
    json req = json::parse(
        protocol::encode(protocol::ReadPod{with(api.kubeconfig()), "default", "web-0"}));
    req["version"] = protocol::kVersion + 1;
    auto next = helper(req.dump());
    EXPECT_EQ(code_of(next), 1) << next.out;
    req["version"] = protocol::kVersion - 1;
    auto previous = helper(req.dump());
    EXPECT_EQ(code_of(previous), 1) << previous.out;
    req["version"] = protocol::kVersion;
    req["op"] = "delete-pod";
    auto unknown = helper(req.dump());
    EXPECT_EQ(code_of(unknown), 1) << unknown.out;
    EXPECT_NE(msg_of(unknown).find("delete-pod"), std::string::npos) << unknown.out;
    auto garbage = helper("not json");
    EXPECT_EQ(code_of(garbage), 6) << garbage.out;
    EXPECT_EQ(api.request_count(), 0u);
}

// A proxy's or load balancer's page in front of an API server that is away: try again later. A
// 404 that is not the API server's NotFound of the object never reads as "the StatefulSet is
// gone" (the plugin would free its pods' addresses).
TEST_F(KubeHelper, AnAnswerThatIsNotTheApiServersIsNeverTakenForOne) {
    api.put_pod("default", "web-0", "u");
    api.force_body("<html>502 Bad Gateway</html>", 200);
    auto page = read_pod("default", "web-0");
    EXPECT_EQ(code_of(page), 11) << page.out;
    EXPECT_NE(msg_of(page).find("502 Bad Gateway"), std::string::npos) << page.out;
    api.force_body("404 page not found", 404, "/apis/");
    auto sets = read_sets({{"default", "web"}});
    EXPECT_EQ(code_of(sets), 11) << sets.out;
    EXPECT_NE(msg_of(sets).find("without the API server's NotFound"), std::string::npos)
        << sets.out;
    api.clear_faults();
    api.put_raw("/api/v1/namespaces/default/pods/odd",
                json{{"apiVersion", "v1"},
                     {"kind", "ConfigMap"},
                     {"metadata", {{"name", "odd"}, {"namespace", "default"}, {"uid", "x"}}}}
                    .dump());
    auto odd = read_pod("default", "odd");
    EXPECT_EQ(code_of(odd), 999) << odd.out;
    EXPECT_NE(msg_of(odd).find("not a Pod"), std::string::npos) << odd.out;
}

// The runtime's environment reaches the helper through the plugin; its proxy (set for image
// pulls) is never used for the API server: only a kubeconfig's proxy-url is.
TEST_F(KubeHelper, ProxyVariablesOfTheRuntimesEnvironmentAreNotUsed) {
    api.put_pod("default", "web-0", "u");
    const ProcessResult r =
        helper(protocol::encode(protocol::ReadPod{with(api.kubeconfig()), "default", "web-0"}),
               {{"HTTPS_PROXY", "http://127.0.0.1:9"},
                {"https_proxy", "http://127.0.0.1:9"},
                {"ALL_PROXY", "http://127.0.0.1:9"}});
    EXPECT_EQ(r.exit_code, 0) << r.out;
}

// A load balancer whose backend went away resets the connection: the request is sent once more,
// within the budget, and answered.
TEST_F(KubeHelper, AConnectionResetOnceIsSentAgainAndAnswered) {
    api.put_pod("default", "web-0", "uid-1");
    api.set_faults(R"({"reset": true, "times": 1})");
    auto r = read_pod("default", "web-0");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const auto reqs = api.requests();
    ASSERT_EQ(reqs.size(), 2u);
    EXPECT_EQ(reqs[0].status, 0) << "the first was reset";
    EXPECT_EQ(reqs[1].status, 200);
}

// Once more, never twice more: a server that resets every connection is an outage.
TEST_F(KubeHelper, AConnectionResetEveryTimeIsTryAgainLaterAfterTwoSends) {
    api.put_pod("default", "web-0", "uid-1");
    api.set_faults(R"({"reset": true})");
    auto r = read_pod("default", "web-0");
    EXPECT_EQ(code_of(r), 11) << r.out;
    EXPECT_NE(msg_of(r).find("(sent 2 times)"), std::string::npos) << r.out;
    EXPECT_EQ(api.request_count(), 2u);
}

// The API server's priority and fairness answers 429 with a Retry-After (5xx from a server
// starting, too): asked again after the wait it names, when the budget has room for it.
TEST_F(KubeHelper, A429WithRetryAfterIsAskedAgainAfterItsWait) {
    api.put_pod("default", "web-0", "uid-1");
    api.set_faults(R"({"status": 429, "retry_after": 1, "times": 1})");
    const auto start = std::chrono::steady_clock::now();
    auto r = read_pod("default", "web-0");
    const auto elapsed = std::chrono::steady_clock::now() - start;
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const auto reqs = api.requests();
    ASSERT_EQ(reqs.size(), 2u);
    EXPECT_EQ(reqs[0].status, 429);
    EXPECT_EQ(reqs[1].status, 200);
    EXPECT_GE(elapsed, std::chrono::seconds(1)) << "the Retry-After was waited for";
}

TEST_F(KubeHelper, A503WithRetryAfterTwiceIsTryAgainLaterSayingSo) {
    api.put_pod("default", "web-0", "uid-1");
    api.set_faults(R"({"status": 503, "retry_after": 0})");
    auto r = read_pod("default", "web-0");
    EXPECT_EQ(code_of(r), 11) << r.out;
    EXPECT_NE(msg_of(r).find("503 ServiceUnavailable"), std::string::npos) << r.out;
    EXPECT_NE(msg_of(r).find("(sent 2 times)"), std::string::npos) << r.out;
    EXPECT_EQ(api.request_count(), 2u);
}

// A wait the budget cannot afford is not started: the pod's ADD is answered at once, and the
// message says why there was no retry.
TEST_F(KubeHelper, ARetryAfterPastTheBudgetIsNotWaitedFor) {
    api.put_pod("default", "web-0", "uid-1");
    api.set_faults(R"({"status": 429, "retry_after": 120})");
    const auto start = std::chrono::steady_clock::now();
    auto r = read_pod("default", "web-0");
    const auto elapsed = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(code_of(r), 11) << r.out;
    EXPECT_NE(msg_of(r).find("Retry-After of 120 s is past what is left of the budget"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(api.request_count(), 1u);
    EXPECT_LT(elapsed, std::chrono::milliseconds(kAnswerBudgetMs)) << "nothing was waited for";
}

// A loopback listener whose accept queue is full: Linux drops every SYN that reaches it, as a
// black-holed address (a control plane's old address, a firewall) does.
class BlackHole {
  public:
    BlackHole() {
        listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
            ::listen(listener_, 0) != 0 ||
            ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
            return;
        }
        port_ = ntohs(a.sin_port);
        // A backlog of 0 queues one connection; the next SYNs find the queue full.
        for (int& f : fillers_) {
            f = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
            ::connect(f, reinterpret_cast<sockaddr*>(&a), sizeof a);
        }
    }
    ~BlackHole() {
        for (int f : fillers_) ::close(f);
        ::close(listener_);
    }
    uint16_t port() const { return port_; }

  private:
    int listener_ = -1;
    int fillers_[2] = {-1, -1};
    uint16_t port_ = 0;
};

// A connection that is not made within the connect timeout is given up then, not at the end of
// the budget: a black-holed API server address costs an ADD the connect timeout.
TEST_F(KubeHelper, ABlackHoledServerCostsTheConnectTimeoutNotTheBudget) {
    constexpr uint64_t kConnectTimeoutMs = 800;
    BlackHole hole;
    ASSERT_NE(hole.port(), 0);
    const std::string kubeconfig = api.write_kubeconfig(
        "black-holed", {.server = "https://127.0.0.1:" + std::to_string(hole.port())});
    const auto start = std::chrono::steady_clock::now();
    auto r = helper(protocol::encode(protocol::ReadPod{
        protocol::Api{kubeconfig, kAnswerBudgetMs, kConnectTimeoutMs}, "default", "web-0"}));
    const auto elapsed = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(code_of(r), 11) << r.out;
    EXPECT_NE(msg_of(r).find("no connection within the connect timeout of 800 ms"),
              std::string::npos)
        << r.out;
    EXPECT_GE(elapsed, std::chrono::milliseconds(kConnectTimeoutMs - 50));
    EXPECT_LT(elapsed, std::chrono::milliseconds(kAnswerBudgetMs / 2))
        << "the budget of " << kAnswerBudgetMs << " ms was not waited out";
}

// A kubeconfig's proxy-url is how requests go (kubectl's reading): through Debian's tinyproxy,
// a CONNECT tunnel to the API server, TLS inside it checked as without.
TEST_F(KubeHelper, AKubeconfigsProxyUrlCarriesTheRequests) {
    HttpProxy proxy;
    ASSERT_TRUE(proxy.ready()) << proxy.why_not_ready();
    api.put_pod("default", "web-0", "uid-1");
    const std::string kubeconfig = api.write_kubeconfig("proxied", {.proxy_url = proxy.url()});
    auto r = read_pod("default", "web-0", kubeconfig);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(proxy.tunnels_to("127.0.0.1:" + std::to_string(api.port())), 1u);
    EXPECT_EQ(api.request_count(), 1u);
    // The proxy gone: the API server is not reached around it.
    // Nothing listens on the discard port here.
    const std::string gone =
        api.write_kubeconfig("proxy-gone", {.proxy_url = "http://127.0.0.1:9"});
    auto down = read_pod("default", "web-0", gone);
    EXPECT_EQ(code_of(down), 11) << down.out;
    EXPECT_NE(msg_of(down).find("through the proxy http://127.0.0.1:9 (kubeconfig " + gone +
                                "'s proxy-url)"),
              std::string::npos)
        << down.out;
    EXPECT_EQ(api.request_count(), 1u);
}

// A name that is no Kubernetes name never reaches a URL (it could name another path).
TEST_F(KubeHelper, ANameThatIsNoKubernetesNameIsRefused) {
    auto r = read_pod("default", "../../secrets/x");
    EXPECT_EQ(code_of(r), 7) << r.out;
    EXPECT_EQ(api.request_count(), 0u);
}

}  // namespace
}  // namespace shmipam::testing
