// Pod facts from the API server, driven as a runtime drives the plugin (docs/kubernetes.md): real
// plugin processes given only what containerd passes (CNI_ARGS, the annotations in
// runtimeConfig, never labels or owners), the real helper shmipam-kube, and the API server's
// stand-in on loopback (TLS, bearer token; tests/support/kube_standin.h) holding the pods and
// StatefulSets.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <regex>
#include <string>
#include <utility>

#include "base/shipped_libraries.h"
#include "tests/support/kube_standin.h"
#include "tests/support/plugin_runner.h"
#include "tests/support/recheck_due.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_for.h"

namespace shmipam::testing {
namespace {

using kube::protocol::OwnerReference;
using nlohmann::json;

// Two cluster-default pools: `db-pool` only for pods labelled app=db (it sorts first for them,
// podAffinity outranking every other affinity), `general` for everyone.
const char* kPools = R"(apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderIPPool
metadata: {name: db-pool}
spec:
  subnet: 10.60.0.0/24
  ips: ["10.60.0.10-10.60.0.20"]
  default: true
  podAffinity: {matchLabels: {app: db}}
---
apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderIPPool
metadata: {name: general}
spec: {subnet: 10.61.0.0/24, ips: ["10.61.0.10-10.61.0.200"], default: true}
)";

// The same without podAffinity: an ordinary pod needs nothing from the API.
const char* kPlainPools = R"(apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderIPPool
metadata: {name: general}
spec: {subnet: 10.61.0.0/24, ips: ["10.61.0.10-10.61.0.200"], default: true}
)";

// The helper's budget (and connect timeout) where a test expects an answer: no test here is
// about the budget (an API server down refuses at once), and a TLS exchange with the stand-in
// on a loaded machine must not fail for it.
constexpr uint64_t kApiBudgetMs = 10'000;

OwnerReference controller(const std::string& kind, const std::string& name,
                          const std::string& api_version = "apps/v1") {
    return OwnerReference{api_version, kind, name, "uid-of-" + name, true};
}

class PodFacts : public ::testing::Test {
  protected:
    TempDir dir;
    KubeStandin api;

    void SetUp() override {
        ASSERT_TRUE(api.ready()) << api.why_not_ready();
        write_pools(kPools);
    }
    void write_pools(const std::string& text) {
        ::mkdir(dir.sub("pools").c_str(), 0755);
        write_file(dir.sub("pools") + "/pools.yaml", text);
    }
    json config(const json& annotations = json::object(), bool with_api = true) const {
        json c = {{"cniVersion", "1.1.0"},
                  {"name", "net"},
                  {"type", "bridge"},
                  {"ipam",
                   {{"type", "shmipam"},
                    {"runDir", dir.sub("run")},
                    {"dataDir", dir.sub("data")},
                    {"poolsDir", dir.sub("pools")},
                    {"nodeName", "node-a"},
                    {"reuseDelay", 0}}}};
        if (with_api) {
            c["ipam"]["kubernetes"] = {{"kubeconfig", api.kubeconfig()},
                                       {"helper", SHMIPAM_KUBE_HELPER_PATH},
                                       {"budgetMs", kApiBudgetMs},
                                       {"connectTimeoutMs", kApiBudgetMs}};
        }
        if (!annotations.empty()) {
            c["runtimeConfig"]["io.kubernetes.cri.pod-annotations"] = annotations;
        }
        return c;
    }
    // The runtime's call for sandbox `cid` of pod default/<pod> whose uid is `uid`.
    static std::map<std::string, std::string> env(const std::string& cmd, const std::string& cid,
                                                  const std::string& pod, const std::string& uid) {
        return cni_env(cmd, cid, "eth0",
                       "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=" + pod +
                           ";K8S_POD_INFRA_CONTAINER_ID=" + cid + ";K8S_POD_UID=" + uid);
    }
    ProcessResult add(const std::string& cid, const std::string& pod, const std::string& uid,
                      const json& cfg) {
        return run_plugin(env("ADD", cid, pod, uid), cfg.dump());
    }
    static std::string address(const ProcessResult& r) {
        const json doc = r.json();
        if (!doc.contains("ips") || doc["ips"].empty()) return "";
        const std::string a = doc["ips"][0]["address"];
        return a.substr(0, a.find('/'));
    }
    void del(const std::string& cid, const std::string& pod, const std::string& uid,
             const json& cfg) {
        auto r = run_plugin(env("DEL", cid, pod, uid), cfg.dump());
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    }
    // Every fixed claim of the node's pool states: {key: policy}.
    std::map<std::string, std::string> claims() {
        std::map<std::string, std::string> out;
        for (const char* state : {"ippool_db-pool", "ippool_general"}) {  // the pools' states
            auto r = run_ctl({"--run-dir", dir.sub("run") + "/_pools", "claims", state, "--json"});
            if (r.exit_code != 0) continue;  // the state was never made
            const json doc = r.json();       // kept: a loop over r.json()[...] would dangle
            for (const auto& c : doc["claims"]) out[c["claim"]] = c["policy"];
        }
        return out;
    }
    size_t calls_to(const std::string& prefix) const {
        size_t n = 0;
        for (const auto& q : api.requests()) n += q.path.starts_with(prefix) ? 1 : 0;
        return n;
    }
    static int code(const ProcessResult& r) { return r.json().value("code", 0); }
    static std::string msg(const ProcessResult& r) { return r.json().value("msg", ""); }
};

constexpr const char* kPods = "/api/v1/namespaces/default/pods/";
constexpr const char* kSets = "/apis/apps/v1/namespaces/default/statefulsets/";

TEST_F(PodFacts, APodAffinityPoolServesThePodWhoseLabelsOnlyTheApiKnows) {
    api.put_pod("default", "db-7f9c-abcde", "uid-1", {{"app", "db"}}, {},
                {controller("ReplicaSet", "db-7f9c")});
    auto r = add("c1", "db-7f9c-abcde", "uid-1", config());
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_TRUE(address(r).starts_with("10.60.0.")) << r.out;
    EXPECT_EQ(calls_to(kPods), 1u);
    // Without the API the runtime's call carries no label: the pool filters the pod out.
    auto blind = add("c2", "db-7f9c-abcde", "uid-1", config(json::object(), false));
    ASSERT_EQ(blind.exit_code, 0) << blind.out << blind.err;
    EXPECT_TRUE(address(blind).starts_with("10.61.0.")) << blind.out;
}

// The helper in a bin directory of its own, laid out as install lays it out: its libraries in
// shmipam-lib/ beside it, the loader among them; or the loader with a damaged libcurl (a
// library merely missing would be looked for in the host's default directories); its path.
std::string helper_with_shipped_libraries(const TempDir& dir, bool every_library) {
    const std::string bin = dir.sub("bin"), lib = bin + "/" + kShippedLibDir;
    std::filesystem::create_directories(lib);
    std::filesystem::copy_file(SHMIPAM_KUBE_HELPER_PATH, bin + "/shmipam-kube");
    const std::string ldd = run_process({"/usr/bin/ldd", SHMIPAM_KUBE_HELPER_PATH}, {}, "").out;
    const std::regex library(R"((/\S+) \(0x)");
    for (auto it = std::sregex_iterator(ldd.begin(), ldd.end(), library);
         it != std::sregex_iterator(); ++it) {
        const std::filesystem::path from = (*it)[1].str();
        const bool loader = from.filename() == kShippedLoader;
        if (!loader && !every_library) continue;
        std::filesystem::copy_file(std::filesystem::canonical(from),
                                   lib + "/" + from.filename().string());
    }
    EXPECT_TRUE(std::filesystem::exists(lib + "/" + kShippedLoader)) << ldd;
    if (!every_library) write_file(lib + "/libcurl.so.4", "not an ELF file");
    return bin + "/shmipam-kube";
}

TEST_F(PodFacts, AHelperWithItsLibrariesShippedBesideItRunsThroughTheShippedLoader) {
    json c = config();
    c["ipam"]["kubernetes"]["helper"] = helper_with_shipped_libraries(dir, true);
    api.put_pod("default", "db-7f9c-abcde", "uid-1", {{"app", "db"}});
    auto r = add("c1", "db-7f9c-abcde", "uid-1", c);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_TRUE(address(r).starts_with("10.60.0.")) << r.out;
}

TEST_F(PodFacts, AHelperWhoseShippedLibraryIsDamagedSaysItCouldNotBeLoaded) {
    json c = config();
    const std::string helper = helper_with_shipped_libraries(dir, false);
    c["ipam"]["kubernetes"]["helper"] = helper;
    api.put_pod("default", "db-7f9c-abcde", "uid-1", {{"app", "db"}});
    auto r = add("c1", "db-7f9c-abcde", "uid-1", c);
    ASSERT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(msg(r).find("the helper " + helper + " could not be loaded by "), std::string::npos)
        << r.out;
    EXPECT_NE(msg(r).find("a library it needs is missing or damaged in shmipam-lib/"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(api.request_count(), 0u);
    EXPECT_TRUE(claims().empty());
}

TEST_F(PodFacts, APodThatNeedsNothingCostsNoCall) {
    write_pools(kPlainPools);
    auto deployment = add("c1", "web-5d4f7b8c9-x2x7z", "uid-1", config());
    ASSERT_EQ(deployment.exit_code, 0) << deployment.out << deployment.err;
    del("c1", "web-5d4f7b8c9-x2x7z", "uid-1", config());
    // A name a StatefulSet could give, with the default switched off.
    json off = config();
    off["ipam"]["statefulSetFixedIPByDefault"] = false;
    auto sts_name = add("c2", "web-0", "uid-2", off);
    ASSERT_EQ(sts_name.exit_code, 0) << sts_name.out << sts_name.err;
    // The same name with the default on, opted out by the pod's annotation.
    auto opted_out = add("c3", "web-1", "uid-3", config({{"ipam.shmipam.io/static-ip", "false"}}));
    ASSERT_EQ(opted_out.exit_code, 0) << opted_out.out << opted_out.err;
    EXPECT_EQ(api.request_count(), 0u);
}

// A static pod: the kubelet runs it from a file and passes its own uid; the API server's mirror
// of it has another uid, the kubelet's in its config.mirror annotation, and the Node as its
// controller. Named "<name>-<node>", on node worker-1 it even looks like a StatefulSet member.
TEST_F(PodFacts, AStaticPodsMirrorIsThePodThoughItsUidIsAnother) {
    write_pools(kPlainPools);
    api.put_pod("kube-system", "etcd-worker-1", "mirror-uid-1", {},
                {{"kubernetes.io/config.mirror", "kubelet-uid-1"}},
                {controller("Node", "worker-1", "v1")});
    auto r = run_plugin(cni_env("ADD", "c1", "eth0",
                                "IgnoreUnknown=1;K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME="
                                "etcd-worker-1;K8S_POD_INFRA_CONTAINER_ID=c1;K8S_POD_UID="
                                "kubelet-uid-1"),
                        config().dump());
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_TRUE(claims().empty()) << "a static pod is no StatefulSet member";
    EXPECT_EQ(api.request_count(), 1u);
    // A mirror naming another uid is another pod's: re-created meanwhile.
    auto other = run_plugin(cni_env("ADD", "c2", "eth0",
                                    "IgnoreUnknown=1;K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME="
                                    "etcd-worker-1;K8S_POD_INFRA_CONTAINER_ID=c2;K8S_POD_UID="
                                    "kubelet-uid-2"),
                            config().dump());
    EXPECT_EQ(code(other), 11) << other.out;
}

// The kubelet marks the pods it runs with their source, and the runtime passes that on: a static
// pod ("file") is nobody's StatefulSet member, and its call asks nothing.
TEST_F(PodFacts, AStaticPodTheRuntimeSaysIsOneMakesNoRequest) {
    write_pools(kPlainPools);
    auto r = add("c1", "etcd-worker-1", "kubelet-uid-1",
                 config({{"kubernetes.io/config.source", "file"}}));
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(api.request_count(), 0u);
    EXPECT_TRUE(claims().empty());
    // From the API server ("api"), a name like a member's still asks.
    api.put_pod("default", "web-0", "uid-2", {}, {}, {controller("ReplicaSet", "web-5d4f7b8c9")});
    auto from_api = add("c2", "web-0", "uid-2", config({{"kubernetes.io/config.source", "api"}}));
    ASSERT_EQ(from_api.exit_code, 0) << from_api.out << from_api.err;
    EXPECT_EQ(api.request_count(), 1u);
}

// What the call's own annotations decide costs no request, whatever the pod's name: static-ip
// "false" decides it keeps no address by name (alone: APodThatNeedsNothingCostsNoCall); an
// ippool annotation naming pools without podAffinity decides its pool. What they leave open still
// asks, once: an ippool annotation naming a pool with podAffinity (the labels), and a name like a
// StatefulSet member's under the StatefulSet default (the controller: a member keeps its address in
// the pool the annotation chose, as Spiderpool's rules say).
TEST_F(PodFacts, AnnotationsThatDecideMakeNoRequestEvenForANameLikeAStatefulSetMembers) {
    const json general = {{"ipam.spidernet.io/ippool", R"({"ipv4": ["general"]})"},
                          {"ipam.shmipam.io/static-ip", "false"}};
    ASSERT_EQ(add("c2", "db-1", "uid-2", config(general)).exit_code, 0);
    const json general_only = {{"ipam.spidernet.io/ippool", R"({"ipv4": ["general"]})"}};
    ASSERT_EQ(add("c3", "web-5d4f7b8c9-x2x7z", "uid-3", config(general_only)).exit_code, 0);
    EXPECT_EQ(api.request_count(), 0u);
    EXPECT_TRUE(claims().empty());
    // Left open: the labels for a pool with podAffinity, the controller for a member's name.
    api.put_pod("default", "db-7f9c-abcde", "uid-4", {{"app", "db"}}, {},
                {controller("ReplicaSet", "db-7f9c")});
    const json affinity = {{"ipam.spidernet.io/ippool", R"({"ipv4": ["db-pool"]})"}};
    auto labelled = add("c4", "db-7f9c-abcde", "uid-4", config(affinity));
    ASSERT_EQ(labelled.exit_code, 0) << labelled.out << labelled.err;
    EXPECT_TRUE(address(labelled).starts_with("10.60.0.")) << labelled.out;
    EXPECT_EQ(api.request_count(), 1u);
    api.put_pod("default", "db-2", "uid-5", {}, {}, {controller("StatefulSet", "db")});
    api.put_statefulset("default", "db", 3, std::nullopt);
    auto member = add("c5", "db-2", "uid-5", config(general_only));
    ASSERT_EQ(member.exit_code, 0) << member.out << member.err;
    EXPECT_TRUE(address(member).starts_with("10.61.0.")) << member.out;
    EXPECT_EQ(calls_to(kPods), 2u);
    EXPECT_EQ(claims().size(), 1u) << "the member keeps its address in the annotation's pool";
}

TEST_F(PodFacts, AStatefulSetPodKeepsItsAddressByDefaultAcrossStopRemoveAndRecreation) {
    write_pools(kPlainPools);
    api.put_statefulset("default", "web", 3, std::nullopt);
    api.put_pod("default", "web-1", "uid-1", {{"app", "web"}}, {},
                {controller("StatefulSet", "web")});
    auto first = add("c1", "web-1", "uid-1", config());
    ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
    // containerd's two DELs: StopPodSandbox's and RemovePodSandbox's.
    del("c1", "web-1", "uid-1", config());
    del("c1", "web-1", "uid-1", config());
    EXPECT_EQ(claims(), (std::map<std::string, std::string>{
                            {"sts:default/web-1/eth0", "while its StatefulSet wants it"}}));
    // The pod re-created by the StatefulSet controller: a new uid, a new sandbox.
    api.put_pod("default", "web-1", "uid-2", {{"app", "web"}}, {},
                {controller("StatefulSet", "web")});
    auto again = add("c2", "web-1", "uid-2", config());
    ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
    EXPECT_EQ(address(again), address(first));
}

TEST_F(PodFacts, AStatefulSetScaledBelowThePodsOrdinalFreesItsClaimAtTheDel) {
    write_pools(kPlainPools);
    api.put_statefulset("default", "web", 3, std::nullopt);
    api.put_pod("default", "web-2", "uid-1", {}, {}, {controller("StatefulSet", "web")});
    ASSERT_EQ(add("c1", "web-2", "uid-1", config()).exit_code, 0);
    ASSERT_EQ(claims().size(), 1u);
    // The controller lowers replicas, then deletes the pod: the DEL finds ordinal 2 unwanted.
    api.put_statefulset("default", "web", 2, std::nullopt);
    del("c1", "web-2", "uid-1", config());
    EXPECT_TRUE(claims().empty());
    EXPECT_GE(calls_to(kSets), 1u);
}

TEST_F(PodFacts, ADeletedOrDeletingStatefulSetFreesTheClaimAtTheDel) {
    write_pools(kPlainPools);
    api.put_statefulset("default", "web", 3, std::nullopt);
    api.put_statefulset("default", "db", 3, 5);
    api.put_pod("default", "web-0", "uid-1", {}, {}, {controller("StatefulSet", "web")});
    api.put_pod("default", "db-5", "uid-2", {}, {}, {controller("StatefulSet", "db")});
    ASSERT_EQ(add("c1", "web-0", "uid-1", config()).exit_code, 0);
    ASSERT_EQ(add("c2", "db-5", "uid-2", config()).exit_code, 0);
    ASSERT_EQ(claims().size(), 2u);
    api.remove_statefulset("default", "web");
    api.put_statefulset("default", "db", 3, 5, /*deleting=*/true);
    del("c1", "web-0", "uid-1", config());
    del("c2", "db-5", "uid-2", config());
    EXPECT_TRUE(claims().empty());
}

TEST_F(PodFacts, AClaimWhoseDelCouldNotReachTheApiIsFreedByALaterRecheck) {
    write_pools(kPlainPools);
    json cfg = config();
    cfg["ipam"]["statefulSetRecheckS"] = 1;
    api.put_statefulset("default", "web", 1, std::nullopt);
    api.put_pod("default", "web-0", "uid-1", {}, {}, {controller("StatefulSet", "web")});
    ASSERT_EQ(add("c1", "web-0", "uid-1", cfg).exit_code, 0);
    api.force_status(503, kSets);
    api.remove_statefulset("default", "web");
    del("c1", "web-0", "uid-1", cfg);  // answers 0: the DEL never fails for the API
    EXPECT_EQ(claims().size(), 1u) << "kept while its set cannot be read";
    api.clear_faults();
    ::sleep(2);  // past statefulSetRecheckS
    // A walk runs in a child of its own after the answer of the ADD or DEL that found it due,
    // and first claims the node's marker (ipam/owner_claims.cpp: <runDir>/.statefulset-recheck)
    // by setting its time.
    const std::string marker = dir.sub("run") + "/.statefulset-recheck";
    const auto marker_time = [&] {
        struct stat st {};
        return ::stat(marker.c_str(), &st) == 0 ? std::pair(st.st_mtim.tv_sec, st.st_mtim.tv_nsec)
                                                : std::pair(time_t(0), long(0));
    };
    const auto before_walk = marker_time();
    ASSERT_EQ(add("c2", "other-5d4f7-x2x7z", "uid-2", cfg).exit_code, 0);
    EXPECT_TRUE(wait_until([&] { return marker_time() != before_walk && claims().empty(); }))
        << "the recheck did not free the claim";
    // At most once per period: an ADD within the period of that walk walks nothing. Its period
    // is an hour, so that it is within it however long the steps above took.
    constexpr uint64_t kPeriodLongerThanTheTest = 3600;
    json within = cfg;
    within["ipam"]["statefulSetRecheckS"] = kPeriodLongerThanTheTest;
    const auto walked = marker_time();
    const size_t set_calls = calls_to(kSets);
    ASSERT_EQ(add("c3", "other-5d4f7-abcde", "uid-3", within).exit_code, 0);
    EXPECT_EQ(calls_to(kSets), set_calls);
    EXPECT_TRUE(marker_time() == walked) << "a walk claimed the marker again";
}

// A node rebooting during an API outage: the runtime sets its StatefulSet pods' sandboxes up
// again, the API server cannot be reached, and each pod whose claim this node holds gets that
// claim's address, the log saying so. A pod without a claim here, and a pod the API server says
// is not there, still get the API server's answer (11), and nothing is held for them.
TEST_F(PodFacts, ASandboxOfAPodWhoseClaimThisNodeHoldsBindsItWhileTheApiServerIsDown) {
    write_pools(kPlainPools);
    json cfg = config();
    cfg["ipam"]["logFile"] = dir.sub("shmipam.log");
    api.put_statefulset("default", "web", 3, std::nullopt);
    for (const char* pod : {"web-0", "web-2"}) {
        api.put_pod("default", pod, std::string("uid-") + pod, {}, {},
                    {controller("StatefulSet", "web")});
    }
    auto first = add("c1", "web-0", "uid-web-0", cfg);
    ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
    const std::string held = address(first);
    ASSERT_EQ(add("c2", "web-2", "uid-web-2", cfg).exit_code, 0);
    del("c1", "web-0", "uid-web-0", cfg);
    del("c2", "web-2", "uid-web-2", cfg);
    ASSERT_EQ(claims().size(), 2u) << "both kept: the set wants them";

    api.stop();
    auto again = add("c3", "web-0", "uid-web-0-new", cfg);
    ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
    EXPECT_EQ(address(again), held);
    const std::string log = read_file(dir.sub("shmipam.log"));
    EXPECT_NE(log.find("cmd=ADD-OFFLINE"), std::string::npos) << log;
    EXPECT_NE(log.find("bound the claim default/web-0 this node holds (general) without the "
                       "API server"),
              std::string::npos)
        << log;
    // A repeated ADD of that sandbox answers the same.
    auto repeated = add("c3", "web-0", "uid-web-0-new", cfg);
    ASSERT_EQ(repeated.exit_code, 0) << repeated.out;
    EXPECT_EQ(address(repeated), held);

    auto unclaimed = add("c4", "web-1", "uid-web-1", cfg);
    EXPECT_EQ(code(unclaimed), 11) << unclaimed.out;
    EXPECT_NE(unclaimed.out.find("unreachable"), std::string::npos) << unclaimed.out;
    EXPECT_EQ(claims().size(), 2u) << "nothing made for a pod without a claim";

    // The API server back, saying web-2 is not there: its claim is not bound.
    ASSERT_TRUE(api.start()) << api.why_not_ready();
    api.remove_pod("default", "web-2");
    auto gone = add("c5", "web-2", "uid-web-2-new", cfg);
    EXPECT_EQ(code(gone), 11) << gone.out;
    EXPECT_NE(gone.out.find("is not in the API server"), std::string::npos) << gone.out;
    auto verify = run_ctl({"--run-dir", dir.sub("run") + "/_pools", "verify", "ippool_general"});
    EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

// A KubeVirt VM's address lasts while the VM does (docs/fixed-ips.md): its launcher pods come
// and go (a restart, a live migration) and each gets the VM's address; the DEL of a launcher
// once the VM is being deleted frees it, and a claim left idle when its VM goes is freed by the
// recheck, which asks for the VMs in the same helper run as the sets.
TEST_F(PodFacts, AVmsAddressLastsWhileTheVmExists) {
    write_pools(kPlainPools);
    json cfg = config({{"ipam.shmipam.io/static-ip", "true"}});
    const auto vmi = [](const std::string& vm) {
        return controller("VirtualMachineInstance", vm, "kubevirt.io/v1");
    };
    api.put_vm("default", "vm1");
    api.put_pod("default", "virt-launcher-vm1-abcde", "uid-a", {}, {}, {vmi("vm1")});
    auto first = add("c1", "virt-launcher-vm1-abcde", "uid-a", cfg);
    ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
    ASSERT_EQ(claims(),
              (std::map<std::string, std::string>{{"vm:default/vm1/eth0", "while its VM exists"}}));
    del("c1", "virt-launcher-vm1-abcde", "uid-a", cfg);
    EXPECT_EQ(claims().size(), 1u) << "kept: the VM exists";
    api.put_pod("default", "virt-launcher-vm1-fghij", "uid-b", {}, {}, {vmi("vm1")});
    auto second = add("c2", "virt-launcher-vm1-fghij", "uid-b", cfg);
    ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
    EXPECT_EQ(address(second), address(first));
    api.put_vm("default", "vm1", /*deleting=*/true);
    del("c2", "virt-launcher-vm1-fghij", "uid-b", cfg);
    EXPECT_TRUE(claims().empty()) << "freed at the DEL: the VM is being deleted";

    json rechecked = cfg;
    rechecked["ipam"]["statefulSetRecheckS"] = 1;
    api.put_vm("default", "vm2");
    api.put_pod("default", "virt-launcher-vm2-abcde", "uid-c", {}, {}, {vmi("vm2")});
    ASSERT_EQ(add("c3", "virt-launcher-vm2-abcde", "uid-c", rechecked).exit_code, 0);
    del("c3", "virt-launcher-vm2-abcde", "uid-c", rechecked);
    ASSERT_EQ(claims().size(), 1u) << "kept: the VM exists";
    api.remove_vm("default", "vm2");
    ::sleep(2);  // past statefulSetRecheckS
    json plain = config();
    plain["ipam"]["statefulSetRecheckS"] = 1;
    ASSERT_EQ(add("c4", "other-5d4f7-x2x7z", "uid-d", plain).exit_code, 0);
    EXPECT_TRUE(wait_until([&] { return claims().empty(); }))
        << "the recheck did not free the claim of a VM gone";
    EXPECT_GE(calls_to("/apis/kubevirt.io/v1/namespaces/default/virtualmachines/vm2"), 2u)
        << "the DEL's check and the walk's";
}

// A recheck that fails is seen: every check (the DEL's, each walk) adds its outcome to
// <runDir>/owner-recheck.json, a failed one writes a line to the invocation log, and shmipamctl
// metrics exports the record; a later check that reads the sets clears what was kept.
TEST_F(PodFacts, AFailedRecheckIsRecordedLoggedAndExportedAndTheNextSuccessShows) {
    write_pools(kPlainPools);
    // A period longer than the test: a walk runs where the test makes it due
    // (tests/support/recheck_due.h).
    json cfg = config();
    cfg["ipam"]["statefulSetRecheckS"] = kRecheckPeriodLongerThanATest;
    cfg["ipam"]["logFile"] = dir.sub("shmipam.log");
    const auto make_walk_due = [&] { ASSERT_TRUE(make_recheck_due(dir.sub("run"))); };
    api.put_statefulset("default", "web", 1, std::nullopt);
    api.put_pod("default", "web-0", "uid-1", {}, {}, {controller("StatefulSet", "web")});
    const std::string record_file = dir.sub("run") + "/owner-recheck.json";
    const auto record = [&] {
        const std::string text = read_file(record_file);
        return text.empty() ? json() : json::parse(text, nullptr, false);
    };
    ASSERT_EQ(add("c1", "web-0", "uid-1", cfg).exit_code, 0);
    // The node's first walk, after that answer, had no idle claim to check: a success.
    ASSERT_TRUE(wait_until([&] { return record().is_object(); })) << "no record at " << record_file;
    const int64_t first_success = record()["lastSuccess"];
    EXPECT_GT(first_success, 0);
    // A role without statefulsets: the DEL's check is refused (the DEL still answers 0).
    api.force_status(403, kSets);
    del("c1", "web-0", "uid-1", cfg);
    EXPECT_EQ(record()["errorsTotal"], 1);
    EXPECT_EQ(record()["lastSuccess"], first_success);
    EXPECT_NE(record()["lastError"]["message"].get<std::string>().find("403"), std::string::npos)
        << record().dump();
    const std::string log = read_file(dir.sub("shmipam.log"));
    EXPECT_NE(log.find("cmd=RECHECK"), std::string::npos) << log;
    EXPECT_NE(log.find("kept until the next check"), std::string::npos) << log;
    // The walk after the next answer fails the same way and says what it kept.
    make_walk_due();
    ASSERT_EQ(add("c2", "other-5d4f7-x2x7z", "uid-2", cfg).exit_code, 0);
    ASSERT_TRUE(wait_until([&] { return record().value("errorsTotal", 0) == 2; }))
        << record().dump();
    EXPECT_EQ(record()["claimsKeptOnError"], 1);
    auto metrics = run_ctl({"--run-dir", dir.sub("run"), "metrics"});
    ASSERT_EQ(metrics.exit_code, 0) << metrics.err;
    for (const std::string& line :
         {std::string("shmipam_owner_recheck_errors_total 2"),
          "shmipam_owner_recheck_last_success_timestamp_seconds " + std::to_string(first_success),
          std::string("shmipam_owner_recheck_claims_kept_on_error 1"),
          std::string("# TYPE shmipam_owner_recheck_errors_total counter")}) {
        EXPECT_NE(metrics.out.find(line), std::string::npos) << line << "\n" << metrics.out;
    }
    // The role fixed and the set gone: the next walk reads it and frees the claim.
    api.clear_faults();
    api.remove_statefulset("default", "web");
    ::sleep(1);  // a success in a later second than the first one
    make_walk_due();
    ASSERT_EQ(add("c3", "other-5d4f7-abcde", "uid-3", cfg).exit_code, 0);
    ASSERT_TRUE(wait_until([&] { return record().value("claimsFreedTotal", 0) == 1; }))
        << record().dump();
    EXPECT_TRUE(claims().empty());
    EXPECT_GT(record()["lastSuccess"].get<int64_t>(), first_success);
    EXPECT_EQ(record()["claimsKeptOnError"], 0);
    EXPECT_EQ(record()["claimsFreedTotal"], 1);
    EXPECT_EQ(record()["errorsTotal"], 2) << "a counter: kept";
    auto after = run_ctl({"--run-dir", dir.sub("run"), "metrics"});
    EXPECT_NE(after.out.find("shmipam_owner_recheck_claims_freed_total 1"), std::string::npos)
        << after.out;
}

// Local pool mode: a StatefulSet pod that moved to another node (a drain, a node failure) took
// an address there; this node's idle claim is freed by the next check once the API server has
// the pod scheduled on another node. Never for a pod not scheduled yet, never on an error.
TEST_F(PodFacts, AStatefulSetPodThatMovedToAnotherNodeHasItsClaimHereFreedByTheNextCheck) {
    write_pools(kPlainPools);
    json cfg = config();  // nodeName node-a
    cfg["ipam"]["statefulSetRecheckS"] = 1;
    api.put_statefulset("default", "web", 3, std::nullopt);
    api.put_pod("default", "web-1", "uid-1", {}, {}, {controller("StatefulSet", "web")}, "node-a");
    ASSERT_EQ(add("c1", "web-1", "uid-1", cfg).exit_code, 0);
    del("c1", "web-1", "uid-1", cfg);  // the pod still on this node (terminating): kept
    ASSERT_EQ(claims().size(), 1u);
    const auto walk = [&](const std::string& cid) {
        ::sleep(2);  // past statefulSetRecheckS
        const size_t before = calls_to(kSets);
        EXPECT_EQ(add(cid, "other-5d4f7-" + cid, "uid-" + cid, cfg).exit_code, 0);
        EXPECT_TRUE(wait_until([&] { return calls_to(kSets) > before; })) << "no walk";
        // The walk's child frees after its answer: wait for it to finish with the state.
        wait_until([&] { return claims().empty(); }, std::chrono::seconds(3));
    };
    // Re-created by its StatefulSet, not scheduled yet: kept.
    api.put_pod("default", "web-1", "uid-2", {}, {}, {controller("StatefulSet", "web")}, "");
    walk("c2");
    EXPECT_EQ(claims().size(), 1u) << "a pod with no node yet may come back here";
    // Scheduled on node-b, but the API answers 503 for pods: kept.
    api.put_pod("default", "web-1", "uid-2", {}, {}, {controller("StatefulSet", "web")}, "node-b");
    api.force_status(503, kPods);
    walk("c3");
    EXPECT_EQ(claims().size(), 1u) << "never on an error";
    api.clear_faults();
    walk("c4");
    EXPECT_TRUE(claims().empty()) << "the pod runs on node-b: its address there, not here";
}

// Without the Node's name in the config (no ipam.nodeName, no node-name file), the host name is
// no proof of where a pod is: nothing is freed for having moved.
TEST_F(PodFacts, WithoutTheNodesNameFromTheConfigNoClaimIsFreedForHavingMoved) {
    write_pools(kPlainPools);
    json cfg = config();
    cfg["ipam"].erase("nodeName");
    cfg["ipam"]["nodeNameFile"] = dir.sub("no-such-nodename");
    cfg["ipam"]["statefulSetRecheckS"] = 1;
    api.put_statefulset("default", "web", 3, std::nullopt);
    api.put_pod("default", "web-1", "uid-1", {}, {}, {controller("StatefulSet", "web")}, "node-a");
    ASSERT_EQ(add("c1", "web-1", "uid-1", cfg).exit_code, 0);
    api.put_pod("default", "web-1", "uid-2", {}, {}, {controller("StatefulSet", "web")}, "node-b");
    del("c1", "web-1", "uid-1", cfg);
    EXPECT_EQ(claims().size(), 1u);
    EXPECT_EQ(calls_to(kPods), 1u) << "the ADD's read only: no pod read for the move";
}

// A claim key longer than the 72 bytes a claim entry keeps reads back truncated: the DEL finds
// the pod's claim by the fingerprint of the key it builds, and frees it all the same.
TEST_F(PodFacts, AClaimWithAKeyLongerThanItsEntryIsStillFreedAtTheDel) {
    write_pools(kPlainPools);
    const std::string set = "alertmanager-kube-prometheus-stack-alertmanager-with-a-long-name";
    const std::string pod = set + "-0";
    api.put_statefulset("default", set, 1, std::nullopt);
    api.put_pod("default", pod, "uid-1", {}, {}, {controller("StatefulSet", set)});
    ASSERT_EQ(add("c1", pod, "uid-1", config()).exit_code, 0);
    ASSERT_EQ(claims().size(), 1u);
    api.put_statefulset("default", set, 0, std::nullopt);
    del("c1", pod, "uid-1", config());
    EXPECT_TRUE(claims().empty());
}

TEST_F(PodFacts, AKubernetesSectionWithoutItsKubeconfigIsRefused) {
    json cfg = config();
    cfg["ipam"]["kubernetes"] = {{"kubeConfig", api.kubeconfig()}};  // misspelt
    auto r = add("c1", "web-0", "uid-1", cfg);
    EXPECT_EQ(code(r), 7) << r.out;
    EXPECT_NE(msg(r).find("ipam.kubernetes needs \"kubeconfig\""), std::string::npos) << r.out;
}

TEST_F(PodFacts, AConnectTimeoutThatIsNoWholeNumberIsRefusedNamingTheField) {
    for (const json& bad : {json(0), json("1000"), json(-5), json(1.5)}) {
        json cfg = config();
        cfg["ipam"]["kubernetes"]["connectTimeoutMs"] = bad;
        auto r = add("c1", "web-0", "uid-1", cfg);
        EXPECT_EQ(code(r), 7) << bad << ": " << r.out;
        EXPECT_NE(msg(r).find("ipam.kubernetes.connectTimeoutMs must be a whole number"),
                  std::string::npos)
            << r.out;
    }
    EXPECT_EQ(api.request_count(), 0u);
}

TEST_F(PodFacts, ADeploymentPodAskingForAStaticIpIsRefusedNamingItsController) {
    write_pools(kPlainPools);
    api.put_pod("default", "web-5d4f7-x2x7z", "uid-1", {}, {},
                {controller("ReplicaSet", "web-5d4f7")});
    auto r = add("c1", "web-5d4f7-x2x7z", "uid-1", config({{"ipam.shmipam.io/static-ip", "true"}}));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(code(r), 120) << r.out;
    EXPECT_NE(msg(r).find("ReplicaSet web-5d4f7"), std::string::npos) << r.out;
}

TEST_F(PodFacts, APodReCreatedMeanwhileAnswersTryAgainLater) {
    api.put_pod("default", "db-7f9c-abcde", "uid-new", {{"app", "db"}});
    auto r = add("c1", "db-7f9c-abcde", "uid-old", config());
    EXPECT_EQ(code(r), 11) << r.out;
    EXPECT_NE(msg(r).find("re-created"), std::string::npos) << r.out;
}

TEST_F(PodFacts, EachApiFailureIsAClearErrorAndTheNextTrySucceeds) {
    api.put_pod("default", "db-7f9c-abcde", "uid-1", {{"app", "db"}});
    // Not there (yet): 11.
    auto missing = add("c1", "db-7f9c-other", "uid-1", config());
    EXPECT_EQ(code(missing), 11) << missing.out;
    // Refused: 7 naming the kubeconfig.
    api.forbid(api.token());
    auto forbidden = add("c1", "db-7f9c-abcde", "uid-1", config());
    EXPECT_EQ(code(forbidden), 7) << forbidden.out;
    EXPECT_NE(forbidden.out.find(api.kubeconfig()), std::string::npos) << forbidden.out;
    api.forbid("nobody");
    api.set_token("another");
    auto unauthorized = add("c1", "db-7f9c-abcde", "uid-1", config());
    EXPECT_EQ(code(unauthorized), 7) << unauthorized.out;
    api.rotate_token();  // the kubeconfig rewritten with the accepted token
    // Down: 11, naming the URL; nothing allocated.
    api.stop();
    auto down = add("c1", "db-7f9c-abcde", "uid-1", config());
    EXPECT_EQ(code(down), 11) << down.out;
    EXPECT_NE(down.out.find(api.server()), std::string::npos) << down.out;
    EXPECT_TRUE(claims().empty());
    ASSERT_TRUE(api.start());
    auto back = add("c1", "db-7f9c-abcde", "uid-1", config());
    ASSERT_EQ(back.exit_code, 0) << back.out << back.err;
    EXPECT_TRUE(address(back).starts_with("10.60.0.")) << back.out;
    // A kubeconfig that does not exist: 7.
    json bad = config();
    bad["ipam"]["kubernetes"]["kubeconfig"] = dir.sub("no-such-kubeconfig");
    auto unreadable = add("c2", "db-7f9c-abcde", "uid-1", bad);
    EXPECT_EQ(code(unreadable), 7) << unreadable.out;
}

TEST_F(PodFacts, TheRuntimesAnnotationsWinAndTheApisCompleteThem) {
    write_pools(kPlainPools);
    api.put_statefulset("default", "web", 3, std::nullopt);
    // The API's pod opts out of a fixed address; the runtime passed no annotation (podman).
    api.put_pod("default", "web-0", "uid-1", {}, {{"ipam.shmipam.io/static-ip", "false"}},
                {controller("StatefulSet", "web")});
    ASSERT_EQ(add("c1", "web-0", "uid-1", config()).exit_code, 0);
    EXPECT_TRUE(claims().empty());
    // The runtime's value for the same key wins.
    api.put_pod("default", "web-1", "uid-2", {}, {{"ipam.shmipam.io/static-ip", "false"}},
                {controller("StatefulSet", "web")});
    ASSERT_EQ(
        add("c2", "web-1", "uid-2", config({{"ipam.shmipam.io/static-ip", "true"}})).exit_code, 0);
    EXPECT_EQ(claims(), (std::map<std::string, std::string>{{"sts:default/web-1/eth0", "never"}}));
}

TEST_F(PodFacts, RangesModeKeepsFixedAddressesOptIn) {
    json cfg = make_config(dir.path(), "ranges", "1.1.0", "10.62.0.0/24");
    cfg["ipam"]["kubernetes"] = {{"kubeconfig", api.kubeconfig()},
                                 {"helper", SHMIPAM_KUBE_HELPER_PATH},
                                 {"budgetMs", kApiBudgetMs},
                                 {"connectTimeoutMs", kApiBudgetMs}};
    api.put_pod("default", "web-0", "uid-1", {}, {}, {controller("StatefulSet", "web")});
    ASSERT_EQ(add("c1", "web-0", "uid-1", cfg).exit_code, 0);
    EXPECT_EQ(api.request_count(), 0u) << "no default in ranges mode: nothing to ask";
    // Asked by annotation, the pod is read and known as a StatefulSet's.
    cfg["runtimeConfig"]["io.kubernetes.cri.pod-annotations"] = {
        {"ipam.shmipam.io/static-ip", "true"}};
    auto r = add("c2", "web-0", "uid-1", cfg);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(calls_to(kPods), 1u);
}

}  // namespace
}  // namespace shmipam::testing
