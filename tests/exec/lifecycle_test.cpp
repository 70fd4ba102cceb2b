// The lifecycle verbs of shmipamctl on states built by real plugin runs (docs/operations.md):
// claims create (a claim deleted by mistake made again), claims export and import (a node
// rebuilt), states and states remove (a pool's state once its pool is gone, removed crash-safe).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A ranges-mode network whose StatefulSet pods (namespace shop) keep their addresses.
class LifecycleClaims : public ::testing::Test {
  protected:
    TempDir dir;

    void SetUp() override { write_config(config("db-0")); }
    // The pod's ADD config: a StatefulSet pod asking for a fixed address; `sticky` false: an
    // ordinary pod.
    json config(const std::string& pod, bool sticky = true, const std::string& policy = "") const {
        json c = make_config(dir.path(), "fixed", "1.1.0", "10.50.0.0/28");
        if (sticky) {
            json a{{"ipam.shmipam.io/static-ip", "true"}};
            if (!policy.empty()) a["ipam.shmipam.io/ip-claim-policy"] = policy;
            c["runtimeConfig"]["io.kubernetes.cri.pod-annotations"] = a;
            c["args"]["cni"]["labels"] =
                json::array({{{"key", "statefulset.kubernetes.io/pod-name"}, {"value", pod}}});
        }
        return c;
    }
    // The network config file an operator hands shmipamctl.
    void write_config(const json& c) { write_file(conf(), c.dump()); }
    std::string conf() const { return dir.sub("net.conf"); }
    static std::map<std::string, std::string> env(const std::string& cmd, const std::string& cid,
                                                  const std::string& pod) {
        return cni_env(cmd, cid, "eth0",
                       "IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=" + pod +
                           ";K8S_POD_UID=uid-" + cid);
    }
    std::string add(const std::string& cid, const std::string& pod, bool sticky = true,
                    const std::string& policy = "") {
        auto r = run_plugin(env("ADD", cid, pod), config(pod, sticky, policy).dump());
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
        if (r.exit_code != 0) return "";
        const std::string cidr = r.json()["ips"][0]["address"];
        return cidr.substr(0, cidr.find('/'));
    }
    void del(const std::string& cid, const std::string& pod) {
        auto r = run_plugin(env("DEL", cid, pod), config(pod).dump());
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    }
    ProcessResult ctl(std::vector<std::string> args) {
        args.insert(args.begin(), {"--run-dir", dir.sub("run")});
        return run_ctl(args);
    }
    json claims() {
        auto r = ctl({"claims", "--json"});
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
        return r.json()["claims"];
    }
    std::string dump() { return ctl({"dump", "fixed", "--json"}).out; }
    void verify_clean() {
        auto r = ctl({"verify", "fixed"});
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    }
    ProcessResult create(const std::string& pod, const std::string& address,
                         std::vector<std::string> more = {}) {
        std::vector<std::string> args{"claims", "create", "--config",  conf(),
                                      "--pod",  pod,      "--address", address};
        args.insert(args.end(), more.begin(), more.end());
        return ctl(args);
    }
};

TEST_F(LifecycleClaims, AClaimDeletedByMistakeIsMadeAgainAndThePodsNextAddGetsItsAddress) {
    const std::string first = add("c1", "db-0");
    ASSERT_FALSE(first.empty());
    del("c1", "db-0");
    ASSERT_EQ(ctl({"release", "--claim", "shop/db-0", "--apply"}).exit_code, 0);
    ASSERT_TRUE(claims().empty());
    auto dry = create("shop/db-0", first);
    EXPECT_EQ(dry.exit_code, 1) << dry.out << dry.err;
    EXPECT_NE(dry.out.find("would create: sts:shop/db-0/eth0 in fixed " + first), std::string::npos)
        << dry.out;
    EXPECT_TRUE(claims().empty()) << "a dry run changes nothing";
    auto made = create("shop/db-0", first, {"--apply", "--policy", "48h"});
    ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
    const json listed = claims();
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0]["addresses"][0], first);
    EXPECT_EQ(listed[0]["use"], "idle") << listed.dump();
    verify_clean();
    // An ordinary pod never gets it; the StatefulSet pod's next sandbox does.
    for (int i = 0; i < 3; ++i) EXPECT_NE(add("o" + std::to_string(i), "web", false), first);
    EXPECT_EQ(add("c2", "db-0"), first);
    EXPECT_EQ(claims()[0]["use"], "in-use") << claims().dump();
    EXPECT_EQ(create("shop/db-0", first, {"--apply"}).exit_code, 0) << "already there: no-op";
    verify_clean();
}

// A VM's claim made by hand with the owner policy reads "while its VM exists" and exports as
// "vm", which imports back as the same policy.
TEST_F(LifecycleClaims, AVmsClaimMadeByHandIsKeptWhileItsVmExistsAndExportsSo) {
    auto made = create("shop/vm1", "10.50.0.9", {"--vm", "--policy", "vm", "--apply"});
    ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
    const json listed = claims();
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0]["claim"], "vm:shop/vm1/eth0");
    EXPECT_EQ(listed[0]["policy"], "while its VM exists");
    const std::string file = dir.sub("claims.json");
    ASSERT_EQ(ctl({"claims", "export", "--out", file}).exit_code, 0);
    const json doc = json::parse(read_file(file));
    ASSERT_EQ(doc["claims"].size(), 1u) << doc.dump();
    EXPECT_EQ(doc["claims"][0]["policy"], "vm");
    EXPECT_EQ(doc["claims"][0]["kind"], "vm");
    verify_clean();
}

TEST_F(LifecycleClaims, ClaimsCreateRefusesAHeldAddressAnOutsideOneAndBadInputChangingNothing) {
    const std::string ordinary = add("o1", "web", false);
    const std::string sticky = add("c1", "db-0");
    const std::string before = dump();
    auto held = create("shop/db-5", ordinary, {"--apply"});
    EXPECT_EQ(held.exit_code, 2) << held.out;
    EXPECT_NE(held.err.find("container o1"), std::string::npos) << held.err;
    auto claimed = create("shop/db-5", sticky, {"--apply"});
    EXPECT_EQ(claimed.exit_code, 2);
    EXPECT_NE(claimed.err.find("sts:shop/db-0/eth0"), std::string::npos) << claimed.err;
    auto other = create("shop/db-0", "10.50.0.9", {"--apply"});
    EXPECT_EQ(other.exit_code, 2) << "the pod has its claim, with another address";
    EXPECT_NE(other.err.find(sticky), std::string::npos) << other.err;
    auto outside = create("shop/db-5", "10.99.0.1", {"--apply"});
    EXPECT_EQ(outside.exit_code, 2);
    EXPECT_NE(outside.err.find("in no range"), std::string::npos) << outside.err;
    EXPECT_EQ(create("nonamespace", "10.50.0.9", {"--apply"}).exit_code, 2);
    EXPECT_EQ(create("shop/db-5", "10.50.0.999", {"--apply"}).exit_code, 2);
    EXPECT_EQ(create("shop/db-5", "10.50.0.9", {"--apply", "--policy", "3d"}).exit_code, 2);
    EXPECT_EQ(create("shop/db-5", "10.50.0.9", {"--apply", "--ifname", "a/b"}).exit_code, 2);
    // Cluster mode: checked on the node like any other before the store is asked (the address
    // is in no pool here; the store part is tests/cluster's).
    json cluster = config("db-5");
    cluster["ipam"].erase("ranges");
    cluster["ipam"]["poolsDir"] = dir.sub("pools");
    cluster["ipam"]["etcd"] = {{"endpoints", json::array({"http://127.0.0.1:1"})}};
    cluster["ipam"]["nodeName"] = "node-a";  // cluster mode's plugin refuses a config without
    fs::create_directories(dir.sub("pools"));
    write_config(cluster);
    auto refused = create("shop/db-5", "10.50.0.9", {"--apply"});
    EXPECT_EQ(refused.exit_code, 2);
    EXPECT_NE(refused.err.find("in no pool"), std::string::npos) << refused.err;
    EXPECT_EQ(dump(), before);
    verify_clean();
}

TEST_F(LifecycleClaims, ANodeRebuiltGetsItsClaimsBackFromAnExportAndASecondImportIsANoOp) {
    const std::string a0 = add("c0", "db-0");
    const std::string a1 = add("c1", "db-1", true, "24");
    add("o1", "web", false);
    del("c1", "db-1");
    const std::string file = dir.sub("claims.json");
    auto exported = ctl({"claims", "export", "--out", file});
    ASSERT_EQ(exported.exit_code, 0) << exported.err;
    const json doc = json::parse(read_file(file));
    ASSERT_EQ(doc["claims"].size(), 2u) << doc.dump();
    for (const auto& c : doc["claims"]) {
        EXPECT_EQ(c["policy"], c["name"] == "db-1" ? "86400s" : "never") << c.dump();
        EXPECT_EQ(c["use"], c["name"] == "db-1" ? "idle" : "in-use") << c.dump();
    }
    // The node is rebuilt: its state and its journal are gone.
    fs::remove_all(dir.sub("run"));
    fs::remove_all(dir.sub("data"));
    auto dry = ctl({"claims", "import", file, "--config", conf()});
    EXPECT_EQ(dry.exit_code, 1) << dry.out << dry.err;
    EXPECT_FALSE(fs::exists(dir.sub("run/fixed"))) << "a dry run creates nothing";
    auto applied = ctl({"claims", "import", file, "--config", conf(), "--apply"});
    ASSERT_EQ(applied.exit_code, 0) << applied.out << applied.err;
    auto again = ctl({"claims", "import", file, "--config", conf(), "--apply", "--json"});
    ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
    const json again_doc = again.json();  // kept: a loop over again.json()[...] would dangle
    for (const auto& c : again_doc["claims"]) EXPECT_EQ(c["result"], "already present");
    const json listed = claims();
    ASSERT_EQ(listed.size(), 2u);
    for (const auto& c : listed) {
        EXPECT_EQ(c["policy"], c["pod"] == "shop/db-1" ? "24h idle" : "never") << c.dump();
        EXPECT_EQ(c["use"], "idle") << "made again idle, with no sandbox";
    }
    verify_clean();
    // Another pod first: it never gets a claimed address; then each pod gets its own back.
    EXPECT_NE(add("o2", "web", false), a0);
    EXPECT_EQ(add("n1", "db-1", true, "24"), a1);
    EXPECT_EQ(add("n0", "db-0"), a0);
    verify_clean();
}

TEST_F(LifecycleClaims, AConflictingImportIsRefusedNamingTheClaimAndImportsNothing) {
    const std::string a0 = add("c0", "db-0");
    const std::string a1 = add("c1", "db-1");
    const std::string file = dir.sub("claims.json");
    ASSERT_EQ(ctl({"claims", "export", "--out", file}).exit_code, 0);
    fs::remove_all(dir.sub("run"));
    fs::remove_all(dir.sub("data"));
    // On the rebuilt node an ordinary pod took db-1's address before the import.
    std::string taken;
    for (int i = 0; taken != a1 && i < 8; ++i) taken = add("o" + std::to_string(i), "web", false);
    ASSERT_EQ(taken, a1);
    const std::string before = dump();
    auto r = ctl({"claims", "import", file, "--config", conf(), "--apply"});
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.err.find("sts:shop/db-1/eth0"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("nothing imported"), std::string::npos) << r.err;
    EXPECT_TRUE(claims().empty()) << "db-0's claim, not in conflict, is not made either";
    EXPECT_EQ(dump(), before);
    (void)a0;
}

TEST_F(LifecycleClaims, AMalformedImportFileExitsTwoAndLeavesTheStateUntouched) {
    add("c0", "db-0");
    const std::string file = dir.sub("claims.json");
    ASSERT_EQ(ctl({"claims", "export", "--out", file}).exit_code, 0);
    ASSERT_EQ(ctl({"release", "--claim", "shop/db-0", "--force", "--apply"}).exit_code, 0);
    const std::string before = dump();
    const json good = json::parse(read_file(file));
    std::vector<json> bad;
    bad.push_back(json("not an object"));
    json v = good;
    v["shmipamClaims"] = 2;
    bad.push_back(v);
    json t = good;
    t["claims"][0]["addresses"] = "10.50.0.2";
    bad.push_back(t);
    json a = good;
    a["claims"][0]["addresses"] = json::array({"10.50.0.300"});
    bad.push_back(a);
    json k = good;
    k["claims"][0]["kind"] = "deployment";
    bad.push_back(k);
    json p = good;
    p["claims"][0]["policy"] = "-1";
    bad.push_back(p);
    json n = good;
    n["claims"][0]["network"] = "elsewhere";
    bad.push_back(n);
    json o = good;
    o["claims"][0]["addresses"] = json::array({"10.51.0.2"});
    bad.push_back(o);
    for (const json& b : bad) {
        write_file(file, b.dump());
        auto r = ctl({"claims", "import", file, "--config", conf(), "--apply"});
        EXPECT_EQ(r.exit_code, 2) << b.dump() << "\n" << r.out;
        EXPECT_FALSE(r.err.empty());
    }
    write_file(file, "{{{ not json");
    EXPECT_EQ(ctl({"claims", "import", file, "--config", conf(), "--apply"}).exit_code, 2);
    EXPECT_TRUE(claims().empty());
    EXPECT_EQ(dump(), before);
}

// A claim for a name no pod can have is never bound, and under policy never it is held for
// good: claims create and claims import refuse such names (a space, an upper-case namespace, a
// name starting with '-'), exit 2, nothing changed.
TEST_F(LifecycleClaims, ANameNoPodCanHaveIsRefusedByClaimsCreateAndImportChangingNothing) {
    add("c0", "db-0");
    const std::string file = dir.sub("claims.json");
    ASSERT_EQ(ctl({"claims", "export", "--out", file}).exit_code, 0);
    ASSERT_EQ(ctl({"release", "--claim", "shop/db-0", "--force", "--apply"}).exit_code, 0);
    const std::string before = dump();
    const json good = json::parse(read_file(file));
    for (const auto& [ns, name, words] :
         std::vector<std::tuple<std::string, std::string, std::string>>{
             {"shop", "db 1", "the name \"db 1\" is no Kubernetes name"},
             {"Shop", "db-1", "the namespace \"Shop\" is no Kubernetes name"},
             {"shop", "-db-1", "the name \"-db-1\" is no Kubernetes name"},
             {"shop", "db-1.", "the name \"db-1.\" is no Kubernetes name"},
             {std::string(64, 'a'), "db-1", "must be no more than 63 characters"}}) {
        auto created = create(ns + "/" + name, "10.50.0.9", {"--apply"});
        EXPECT_EQ(created.exit_code, 2) << ns << "/" << name << ": " << created.out;
        EXPECT_NE(created.err.find(words), std::string::npos) << created.err;
        json record = good;
        record["claims"][0]["namespace"] = ns;
        record["claims"][0]["name"] = name;
        write_file(file, record.dump());
        auto imported = ctl({"claims", "import", file, "--config", conf(), "--apply"});
        EXPECT_EQ(imported.exit_code, 2) << ns << "/" << name << ": " << imported.out;
        EXPECT_NE(imported.err.find(words), std::string::npos) << imported.err;
    }
    // A dotted name is one (a DNS subdomain), and accepted.
    EXPECT_EQ(create("shop/db.v2-0", "10.50.0.9", {}).exit_code, 1) << "a dry run that would work";
    EXPECT_TRUE(claims().empty());
    EXPECT_EQ(dump(), before);
}

// Pool mode: a pool whose file is removed leaves its state on the node.
const char* kPools = R"(apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderIPPool
metadata: {name: stay}
spec: {subnet: 10.40.0.0/24, ips: ["10.40.0.10-10.40.0.20"], gateway: 10.40.0.1, default: true}
)";
const char* kGone = R"(apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderIPPool
metadata: {name: gone}
spec: {subnet: 10.42.0.0/24, ips: ["10.42.0.5-10.42.0.9"], gateway: 10.42.0.1}
)";

class LifecycleStates : public ::testing::Test {
  protected:
    TempDir dir;
    void SetUp() override {
        fs::create_directories(dir.sub("pools"));
        write_file(dir.sub("pools/stay.yaml"), kPools);
        write_file(dir.sub("pools/gone.yaml"), kGone);
        write_file(conf(), config().dump());
    }
    std::string conf() const { return dir.sub("net.conf"); }
    json config(const std::string& annotations = "") const {
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
        if (!annotations.empty()) {
            c["runtimeConfig"]["io.kubernetes.cri.pod-annotations"] = json::parse(annotations);
        }
        return c;
    }
    json gone_config() const {
        return config(R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"gone\"]}"})");
    }
    static std::map<std::string, std::string> env(const std::string& cmd, const std::string& id) {
        return cni_env(cmd, id, "eth0",
                       "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=pod-" + id);
    }
    std::string add(const std::string& id, const json& cfg) {
        auto r = run_plugin(env("ADD", id), cfg.dump());
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
        return r.exit_code == 0 ? r.json()["ips"][0]["address"].get<std::string>() : "";
    }
    ProcessResult ctl(std::vector<std::string> args) {
        args.insert(args.begin(), {"--run-dir", dir.sub("run")});
        return run_ctl(args);
    }
    json states() {
        auto r = ctl({"states", "--config", conf(), "--json"});
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
        return r.json();
    }
    ProcessResult remove(std::vector<std::string> more = {}) {
        std::vector<std::string> args{"states", "--config", conf(), "remove", "pool/gone"};
        args.insert(args.end(), more.begin(), more.end());
        return ctl(args);
    }
    void verify_clean(const std::string& state) {
        auto r = ctl({"verify", state});
        EXPECT_EQ(r.exit_code, 0) << state << ": " << r.out << r.err;
    }
    // A pool state with an address released, its pool's file then removed.
    void leave_gone_state() {
        add("g1", gone_config());
        ASSERT_EQ(run_plugin(env("DEL", "g1"), gone_config().dump()).exit_code, 0);
        ASSERT_EQ(::unlink(dir.sub("pools/gone.yaml").c_str()), 0);
    }
    bool gone_state_whole() {
        return fs::exists(dir.sub("run/_pools/ippool_gone/index")) &&
               fs::exists(dir.sub("data/_pools/ippool_gone"));
    }
    bool gone_state_removed() {
        for (const char* d : {"run/_pools", "data/_pools"}) {
            for (const auto& e : fs::directory_iterator(dir.sub(d))) {
                if (e.path().filename().string().find("gone") != std::string::npos) return false;
            }
        }
        return true;
    }
};

TEST_F(LifecycleStates, AStateWhosePoolIsGoneIsListedAndRemovedWhenNothingInItIsInUse) {
    add("s1", config());
    leave_gone_state();
    const json listed = states();
    ASSERT_EQ(listed["withdrawn"].size(), 1u) << listed.dump();
    EXPECT_EQ(listed["withdrawn"][0]["state"], "pool/gone");
    EXPECT_TRUE(listed["withdrawn"][0]["inUse"].empty());
    auto dry = remove();
    EXPECT_EQ(dry.exit_code, 1) << dry.out << dry.err;
    EXPECT_TRUE(gone_state_whole()) << "a dry run removes nothing";
    auto done = remove({"--apply"});
    ASSERT_EQ(done.exit_code, 0) << done.out << done.err;
    EXPECT_TRUE(gone_state_removed());
    EXPECT_TRUE(states()["withdrawn"].empty());
    verify_clean("pool/stay");
    // The pool added again gets a fresh state: nothing of the old one comes back.
    write_file(dir.sub("pools/gone.yaml"), kGone);
    EXPECT_EQ(add("g2", gone_config()), "10.42.0.5/24");
    auto d = ctl({"dump", "pool/gone", "--json"});
    EXPECT_EQ(d.json()["allocations"].size(), 1u) << d.out;
    verify_clean("pool/gone");
}

TEST_F(LifecycleStates, RemovingAStateInUseIsRefusedNamingWhatHoldsItUnlessForced) {
    const std::string held = add("g1", gone_config());
    ASSERT_EQ(::unlink(dir.sub("pools/gone.yaml").c_str()), 0);
    auto refused = remove({"--apply"});
    EXPECT_EQ(refused.exit_code, 2) << refused.out;
    EXPECT_NE(refused.out.find("container g1"), std::string::npos) << refused.out;
    EXPECT_NE(refused.out.find(held.substr(0, held.find('/'))), std::string::npos);
    EXPECT_TRUE(gone_state_whole());
    verify_clean("pool/gone");
    auto forced = remove({"--apply", "--force"});
    EXPECT_EQ(forced.exit_code, 0) << forced.out << forced.err;
    EXPECT_TRUE(gone_state_removed());
}

TEST_F(LifecycleStates, AConfiguredPoolsStateAnUnknownOneAndABadNameAreRefused) {
    add("s1", config());
    auto configured = ctl({"states", "--config", conf(), "remove", "pool/stay", "--apply"});
    EXPECT_EQ(configured.exit_code, 2);
    EXPECT_NE(configured.err.find("configured"), std::string::npos) << configured.err;
    EXPECT_EQ(ctl({"states", "--config", conf(), "remove", "pool/none", "--apply"}).exit_code, 2);
    EXPECT_EQ(ctl({"states", "--config", conf(), "remove", "pool/../x", "--apply"}).exit_code, 2);
    EXPECT_EQ(ctl({"states", "--config", conf(), "remove", "stay", "--apply"}).exit_code, 2);
    EXPECT_TRUE(fs::exists(dir.sub("run/_pools/ippool_stay/index")));
    verify_clean("pool/stay");
}

// Pool mode: the claim goes to the state of the pool whose allocatable addresses hold it, and
// the pod's ADD, which picks that pool, gets it.
TEST_F(LifecycleStates, APoolModeClaimGoesToThePoolHoldingItsAddressAndThePodGetsIt) {
    json sticky = config(R"({"ipam.shmipam.io/static-ip": "true"})");
    sticky["args"]["cni"]["labels"] =
        json::array({{{"key", "statefulset.kubernetes.io/pod-name"}, {"value", "db-0"}}});
    auto create = [&](const std::string& address) {
        return ctl({"claims", "create", "--config", conf(), "--pod", "shop/db-0", "--address",
                    address, "--apply"});
    };
    for (const char* outside : {"10.99.0.1", "10.40.0.1", "10.40.0.30"}) {
        auto r = create(outside);
        EXPECT_EQ(r.exit_code, 2) << outside << ": " << r.out;
        EXPECT_NE(r.err.find("in no pool"), std::string::npos) << r.err;
    }
    auto made = create("10.40.0.15");
    ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
    EXPECT_NE(made.out.find("in pool/stay"), std::string::npos) << made.out;
    auto r = run_plugin(
        cni_env("ADD", "c1", "eth0", "IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=db-0"),
        sticky.dump());
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(r.json()["ips"][0]["address"], "10.40.0.15/24");
    verify_clean("pool/stay");
}

// A removal killed after each of its steps (the state each step leaves, made by hand: fault
// points exist only in the faults build) is finished by the next run, never opened by the
// plugin meanwhile, and the pool added again gets a fresh state.
TEST_F(LifecycleStates, ARemovalKilledAfterAnyStepIsFinishedByTheNextRun) {
    enum Step { kJournalAside, kArenaAside, kArenaDeleted, kHalfDeleted };
    for (Step step : {kJournalAside, kArenaAside, kArenaDeleted, kHalfDeleted}) {
        SCOPED_TRACE("step " + std::to_string(step));
        fs::remove_all(dir.sub("run"));
        fs::remove_all(dir.sub("data"));
        write_file(dir.sub("pools/gone.yaml"), kGone);
        add("s1", config());
        leave_gone_state();
        const std::string j = dir.sub("data/_pools/ippool_gone");
        const std::string a = dir.sub("run/_pools/ippool_gone");
        const std::string ja = dir.sub("data/_pools/.removing.ippool_gone");
        const std::string aa = dir.sub("run/_pools/.removing.ippool_gone");
        fs::rename(j, ja);
        if (step >= kArenaAside) fs::rename(a, aa);
        if (step >= kArenaDeleted) fs::remove_all(aa);
        if (step == kHalfDeleted) {
            ASSERT_NE(fs::directory_iterator(ja), fs::directory_iterator());
            fs::remove_all(fs::directory_iterator(ja)->path());
        }
        // Meanwhile the plugin serves the other pool and never lists what is set aside.
        add("s2", config());
        auto del = run_plugin(env("DEL", "nobody"), config().dump());  // opens every pool state
        EXPECT_EQ(del.exit_code, 0) << del.out;
        const json listed = states();
        ASSERT_EQ(listed["finishedRemovals"].size(), 1u) << listed.dump();
        EXPECT_EQ(listed["finishedRemovals"][0], "pool/gone");
        EXPECT_TRUE(listed["withdrawn"].empty()) << listed.dump();
        EXPECT_TRUE(gone_state_removed());
        verify_clean("pool/stay");
        write_file(dir.sub("pools/gone.yaml"), kGone);
        EXPECT_EQ(add("g2", gone_config()), "10.42.0.5/24") << "a fresh state";
        verify_clean("pool/gone");
    }
}

// The window a removal killed between its two renames leaves: the pool added back and used
// before the next run. The finish never deletes that live state (it only drops the old journal).
TEST_F(LifecycleStates, APoolAddedBackBeforeAKilledRemovalIsFinishedIsNeverDeleted) {
    leave_gone_state();
    fs::rename(dir.sub("data/_pools/ippool_gone"), dir.sub("data/_pools/.removing.ippool_gone"));
    write_file(dir.sub("pools/gone.yaml"), kGone);
    ASSERT_FALSE(add("g2", gone_config()).empty());
    const json listed = states();
    EXPECT_EQ(listed["finishedRemovals"].size(), 1u) << listed.dump();
    EXPECT_TRUE(fs::exists(dir.sub("run/_pools/ippool_gone/index")));
    EXPECT_TRUE(fs::exists(dir.sub("data/_pools/ippool_gone")));
    EXPECT_FALSE(fs::exists(dir.sub("data/_pools/.removing.ippool_gone")));
    auto d = ctl({"dump", "pool/gone", "--json", "--container", "g2"});
    EXPECT_EQ(d.json()["allocations"].size(), 1u) << d.out;
}

// SIGKILLed at random moments (no fault points in this build): every time the state is whole
// or removed, and the next run finishes it.
TEST_F(LifecycleStates, ARemovalSigkilledAtRandomLeavesTheStateWholeOrRemoved) {
    const auto leave_a_round = [&] {
        fs::remove_all(dir.sub("run"));
        fs::remove_all(dir.sub("data"));
        write_file(dir.sub("pools/gone.yaml"), kGone);
        add("s1", config());
        leave_gone_state();
    };
    const std::vector<std::string> removal{SHMIPAMCTL_PATH, "--run-dir", dir.sub("run"),
                                           "states",        "--config",  conf(),
                                           "remove",        "pool/gone", "--apply"};
    // What a removal takes, from spawn to exit, on this machine now (the median of a few whole
    // runs): the kill times are fractions of it, never fixed microseconds, which on a slower
    // machine would all land while the process is still starting.
    constexpr int kTimingRuns = 5;  // odd: the median is one of them
    std::vector<std::chrono::microseconds> took;
    for (int i = 0; i < kTimingRuns; ++i) {
        leave_a_round();
        ASSERT_FALSE(HasFatalFailure());
        const auto start = std::chrono::steady_clock::now();
        const ProcessResult r = run_process(removal, {}, "");
        took.push_back(std::chrono::duration_cast<std::chrono::microseconds>(
            std::chrono::steady_clock::now() - start));
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
        ASSERT_TRUE(gone_state_removed());
    }
    std::nth_element(took.begin(), took.begin() + kTimingRuns / 2, took.end());
    const std::chrono::microseconds removal_time = took[kTimingRuns / 2];
    // The kills sweep a removal's run from a quarter of it (its start: the exec and the reads)
    // to past its end (its steps are the last of it).
    constexpr int kRounds = 24;
    constexpr int kFirstKillPercent = 25, kLastKillPercent = 125;
    int whole = 0, removed = 0;
    for (int round = 0; round < kRounds; ++round) {
        leave_a_round();
        ASSERT_FALSE(HasFatalFailure());
        Child child(removal, {}, "");
        const int percent =
            kFirstKillPercent + (kLastKillPercent - kFirstKillPercent) * round / (kRounds - 1);
        std::this_thread::sleep_for(removal_time * percent / 100);
        ::kill(child.pid(), SIGKILL);
        child.wait();
        const bool journal_named = fs::exists(dir.sub("data/_pools/ippool_gone"));
        if (journal_named) {
            EXPECT_TRUE(gone_state_whole()) << "round " << round;
            ++whole;
        } else {
            ++removed;
        }
        const json listed = states();
        EXPECT_EQ(listed["withdrawn"].size(), journal_named ? 1u : 0u) << listed.dump();
        if (!journal_named) {
            EXPECT_TRUE(gone_state_removed()) << "round " << round;
        }
        verify_clean("pool/stay");
    }
    std::cout << "a removal takes " << removal_time.count() << " us; kills: " << whole
              << " left the state whole, " << removed << " after the removal's commit\n";
}

}  // namespace
}  // namespace shmipam::testing
