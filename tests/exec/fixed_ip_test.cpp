// Fixed addresses driven as a runtime drives them (docs/fixed-ips.md): real plugin processes,
// the StatefulSet label in args.cni.labels, the annotations in runtimeConfig, a new container ID
// and pod UID for every sandbox, and shmipamctl to look and to release.
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>

#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;

class FixedIp : public ::testing::Test {
  protected:
    TempDir dir;

    // The config of the ADD of pod `pod` (namespace shop), a StatefulSet pod unless `label` is
    // empty, with these annotations.
    json config(const std::string& pod, const json& annotations = json::object(),
                const std::string& label = "same") const {
        json c = make_config(dir.path(), "fixed", "1.1.0", "10.50.0.0/28");
        if (!annotations.empty()) {
            c["runtimeConfig"]["io.kubernetes.cri.pod-annotations"] = annotations;
        }
        if (!label.empty()) {
            c["args"]["cni"]["labels"] =
                json::array({{{"key", "statefulset.kubernetes.io/pod-name"},
                              {"value", label == "same" ? pod : label}},
                             {{"key", "app"}, {"value", "db"}}});
        }
        return c;
    }
    static json sticky(const std::string& policy = "") {
        json a{{"ipam.shmipam.io/static-ip", "true"}};
        if (!policy.empty()) a["ipam.shmipam.io/ip-claim-policy"] = policy;
        return a;
    }
    // The runtime's call for sandbox `cid` of pod shop/<pod>, with a UID of its own.
    static std::map<std::string, std::string> env(const std::string& cmd, const std::string& cid,
                                                  const std::string& pod = "db-0") {
        return cni_env(cmd, cid, "eth0",
                       "IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=" + pod +
                           ";K8S_POD_UID=uid-" + cid);
    }
    std::string add(const std::string& cid, const json& cfg, const std::string& pod = "db-0") {
        auto r = run_plugin(env("ADD", cid, pod), cfg.dump());
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
        if (r.exit_code != 0) return "";
        return r.json()["ips"][0]["address"];
    }
    void del(const std::string& cid, const json& cfg, const std::string& pod = "db-0") {
        auto r = run_plugin(env("DEL", cid, pod), cfg.dump());
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    }
    ProcessResult ctl(std::vector<std::string> args) {
        args.insert(args.begin(), {"--run-dir", dir.sub("run")});
        return run_ctl(args);
    }
    json claims() {
        auto r = ctl({"claims", "fixed", "--json"});
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
        return r.json()["claims"];
    }
    void verify_clean() {
        auto r = ctl({"verify", "fixed"});
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    }
};

TEST_F(FixedIp, ARestartWithANewContainerIdAndUidGetsTheSameAddress) {
    const json cfg = config("db-0", sticky());
    const std::string first = add("c1", cfg);
    del("c1", cfg);
    EXPECT_EQ(add("c2", cfg), first);
    auto again = run_plugin(env("ADD", "c2"), cfg.dump());
    EXPECT_EQ(again.json()["ips"][0]["address"], first) << "a repeated ADD stays idempotent";
    auto check = run_plugin(env("CHECK", "c2"), [&] {
        json c = cfg;
        c["prevResult"] = again.json();
        return c.dump();
    }());
    EXPECT_EQ(check.exit_code, 0) << check.out;
    verify_clean();
}

TEST_F(FixedIp, ScaleDownThenUpGetsTheSameAddressAndNobodyElseGetsItMeanwhile) {
    const json cfg = config("db-0", sticky());
    const std::string first = add("c1", cfg);
    del("c1", cfg);
    const json plain = config("web-1", json::object(), "");
    for (int i = 0; i < 8; ++i) {
        const std::string other = add("w" + std::to_string(i), plain, "web-1");
        EXPECT_NE(other, first);
        if (i % 2 == 1) del("w" + std::to_string(i), plain, "web-1");
    }
    EXPECT_EQ(add("c2", cfg), first);
    verify_clean();
}

TEST_F(FixedIp, AStaleDelAfterTheNewAddKeepsTheAddress) {
    const json cfg = config("db-0", sticky());
    const std::string first = add("c1", cfg);
    EXPECT_EQ(add("c2", cfg), first) << "the node lost c1 without a DEL";
    del("c1", cfg);
    const json c = claims();
    ASSERT_EQ(c.size(), 1u) << c;
    EXPECT_EQ(c[0]["use"], "in-use");
    EXPECT_EQ(c[0]["containerID"], "c2");
    EXPECT_EQ(c[0]["name"], "shop/db-0");
    EXPECT_NE(add("x", config("web-1", json::object(), ""), "web-1"), first);
    verify_clean();
}

TEST_F(FixedIp, TwoSandboxesAtOnceTheNewerHoldsTheAddressAndTheOlderFreesNothing) {
    const json cfg = config("db-0", sticky());
    const std::string first = add("c1", cfg);
    EXPECT_EQ(add("c2", cfg), first);
    auto back = run_plugin(env("ADD", "c1"), cfg.dump());
    EXPECT_EQ(back.exit_code, 1);
    EXPECT_EQ(back.json()["code"], 123) << back.out;
    del("c1", cfg);
    del("c1", cfg);  // and again: DEL is idempotent
    EXPECT_EQ(claims()[0]["containerID"], "c2");
    for (int i = 0; i < 12; ++i) {  // every other address of the /28 (.1 is the gateway)
        EXPECT_NE(add("o" + std::to_string(i), config("web-1", json::object(), ""), "web-1"),
                  first);
    }
    verify_clean();
}

TEST_F(FixedIp, TheConfigSwitchMakesEveryStatefulSetPodStickyAndAnAnnotationOptsOut) {
    json cfg = config("db-0");
    cfg["ipam"]["statefulSetFixedIP"] = true;
    const std::string first = add("c1", cfg);
    del("c1", cfg);
    EXPECT_EQ(add("c2", cfg), first);
    json out = config("db-1", json{{"ipam.shmipam.io/static-ip", "false"}});
    out["ipam"]["statefulSetFixedIP"] = true;
    add("d1", out, "db-1");
    EXPECT_EQ(claims().size(), 1u) << "db-1 opted out";
}

TEST_F(FixedIp, APodThatIsNoStatefulSetPodButAsksGetsAClearErrorAndNothing) {
    const json cfg = config("web-1", sticky(), "");
    auto r = run_plugin(env("ADD", "c1", "web-1"), cfg.dump());
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.json()["code"], 120) << r.out;
    EXPECT_NE(r.json()["msg"].get<std::string>().find("StatefulSet"), std::string::npos) << r.out;
    // A label naming another pod is not this pod's StatefulSet label either.
    auto r2 = run_plugin(env("ADD", "c2", "db-0"), config("db-0", sticky(), "db-9").dump());
    EXPECT_EQ(r2.json()["code"], 120) << r2.out;
    // And a policy nobody can read.
    auto r3 = run_plugin(env("ADD", "c3"), config("db-0", sticky("1.5h")).dump());
    EXPECT_EQ(r3.json()["code"], 120) << r3.out;
    EXPECT_NE(r3.out.find("1.5h"), std::string::npos) << r3.out;
    auto dump = ctl({"dump", "fixed", "--json"});
    if (dump.exit_code == 0) {
        // (Bound first: iterating a member of the temporary json() read freed memory.)
        const json d = dump.json();
        ASSERT_TRUE(d.is_object() && d.contains("allocations")) << dump.out;
        for (const auto& s : d["allocations"]) EXPECT_NE(s["state"], "allocated") << s;
    }
}

TEST_F(FixedIp, PolicyZeroFreesTheAddressAtTheDel) {
    const json cfg = config("db-0", sticky("0"));
    const std::string first = add("c1", cfg);
    del("c1", cfg);
    EXPECT_TRUE(claims().empty());
    verify_clean();
}

TEST_F(FixedIp, APolicyOfTwoSecondsIsFreedByTheNextInvocationAfterThem) {
    const json cfg = config("db-0", sticky("2s"));
    const std::string first = add("c1", cfg);
    del("c1", cfg);
    ASSERT_EQ(claims().size(), 1u);
    EXPECT_EQ(claims()[0]["use"], "idle");
    EXPECT_EQ(claims()[0]["policy"], "2s idle");
    ::sleep(3);
    EXPECT_EQ(claims()[0]["due"], true) << "due, and still there: no invocation met it";
    add("x", config("web-1", json::object(), ""), "web-1");
    EXPECT_TRUE(claims().empty());
    verify_clean();
}

TEST_F(FixedIp, AnOperatorListsAndReleasesAClaimByName) {
    const json cfg = config("db-0", sticky());
    const std::string first = add("c1", cfg);
    auto table = ctl({"claims"});
    EXPECT_EQ(table.exit_code, 0);
    EXPECT_NE(table.out.find("shop/db-0"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("in use by c1"), std::string::npos) << table.out;
    // In use: left alone without --force.
    auto busy = ctl({"release", "--claim", "shop/db-0", "--apply"});
    EXPECT_EQ(busy.exit_code, 1) << busy.out;
    EXPECT_NE(busy.out.find("delete the pod first"), std::string::npos) << busy.out;
    del("c1", cfg);
    auto dry = ctl({"release", "--claim", "shop/db-0"});
    EXPECT_EQ(dry.exit_code, 1) << "a dry run that found work";
    EXPECT_EQ(claims().size(), 1u);
    auto done = ctl({"release", "--claim", "shop/db-0", "--apply", "--json"});
    EXPECT_EQ(done.exit_code, 0) << done.out << done.err;
    EXPECT_EQ(done.json()["released"].size(), 1u);
    EXPECT_TRUE(claims().empty());
    auto none = ctl({"release", "--claim", "shop/nobody", "--apply"});
    EXPECT_EQ(none.exit_code, 1);
    EXPECT_NE(none.err.find("no claim named shop/nobody"), std::string::npos) << none.err;
    verify_clean();
}

TEST_F(FixedIp, MetricsCountClaimsInUseAndIdle) {
    const json cfg = config("db-0", sticky());
    add("c1", cfg);
    add("d1", config("db-1", sticky()), "db-1");
    del("d1", config("db-1", sticky()), "db-1");
    auto m = ctl({"metrics", "fixed"});
    EXPECT_NE(m.out.find("shmipam_fixed_address_claims{network=\"fixed\",state=\"in_use\"} 1"),
              std::string::npos)
        << m.out;
    EXPECT_NE(m.out.find("shmipam_fixed_address_claims{network=\"fixed\",state=\"idle\"} 1"),
              std::string::npos)
        << m.out;
}

// A KubeVirt VM's launcher pod gets a new name at every start; the VM's name keeps the address.
TEST_F(FixedIp, AVirtualMachineKeepsItsAddressAcrossLauncherPods) {
    auto launcher = [&](const std::string& pod) {
        json c = make_config(dir.path(), "fixed", "1.1.0", "10.50.0.0/28");
        c["runtimeConfig"]["io.kubernetes.cri.pod-annotations"] = sticky();
        c["args"]["cni"]["labels"] =
            json::array({{{"key", "vm.kubevirt.io/name"}, {"value", "vm1"}},
                         {{"key", "kubevirt.io"}, {"value", "virt-launcher"}}});
        return c;
    };
    const std::string first =
        add("l1", launcher("virt-launcher-vm1-abcde"), "virt-launcher-vm1-abcde");
    del("l1", launcher("virt-launcher-vm1-abcde"), "virt-launcher-vm1-abcde");
    EXPECT_EQ(add("l2", launcher("virt-launcher-vm1-fghij"), "virt-launcher-vm1-fghij"), first);
    const json c = claims();
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0]["kind"], "vm");
    EXPECT_EQ(c[0]["name"], "shop/vm1");
    // The operator finds the launcher's address by its container ID, through the claim.
    auto d = ctl({"dump", "fixed", "--container", "l2", "--json"});
    ASSERT_EQ(d.json()["allocations"].size(), 1u) << d.out;
    EXPECT_EQ(d.json()["allocations"][0]["usedBy"], "l2");
    verify_clean();
}

}  // namespace
}  // namespace shmipam::testing

namespace shmipam::testing {
namespace {

// Pool mode: a claim lives in the pool state its pod selected.
class FixedIpPools : public ::testing::Test {
  protected:
    TempDir dir;
    void SetUp() override { write_pools(""); }
    void write_pools(const std::string& alpha_exclude) {
        ::mkdir(dir.sub("pools").c_str(), 0755);
        write_file(dir.sub("pools") + "/pools.yaml",
                   "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
                   "metadata: {name: alpha}\nspec: {subnet: 10.60.0.0/24, ips: "
                   "[\"10.60.0.10-10.60.0.20\"]" +
                       (alpha_exclude.empty() ? "" : ", excludeIPs: [\"" + alpha_exclude + "\"]") +
                       "}\n---\napiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
                       "metadata: {name: beta}\nspec: {subnet: 10.61.0.0/24, ips: "
                       "[\"10.61.0.10-10.61.0.20\"]}\n");
    }
    std::string pod = "db-0";
    std::string ns = "shop";
    json config(const std::string& pool) const {
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
        c["runtimeConfig"]["io.kubernetes.cri.pod-annotations"] = {
            {"ipam.spidernet.io/ippool", "{\"ipv4\": [\"" + pool + "\"]}"},
            {"ipam.shmipam.io/static-ip", "true"}};
        c["args"]["cni"]["labels"] =
            json::array({{{"key", "statefulset.kubernetes.io/pod-name"}, {"value", pod}}});
        return c;
    }
    std::map<std::string, std::string> env(const std::string& cmd, const std::string& cid) const {
        return cni_env(cmd, cid, "eth0",
                       "IgnoreUnknown=1;K8S_POD_NAMESPACE=" + ns + ";K8S_POD_NAME=" + pod +
                           ";K8S_POD_UID=u-" + cid);
    }
    std::string add(const std::string& cid, const std::string& pool) {
        auto r = run_plugin(env("ADD", cid), config(pool).dump());
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
        return r.exit_code == 0 ? r.json()["ips"][0]["address"].get<std::string>() : "";
    }
    void del(const std::string& cid, const std::string& pool) {
        auto r = run_plugin(env("DEL", cid), config(pool).dump());
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    }
    json claims(const std::string& state) {
        auto r = run_ctl({"--run-dir", dir.sub("run"), "claims", state, "--json"});
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
        return r.json()["claims"];
    }
    void verify_clean(const std::string& state) {
        auto r = run_ctl({"--run-dir", dir.sub("run"), "verify", state});
        EXPECT_EQ(r.exit_code, 0) << state << ": " << r.out << r.err;
    }
};

TEST_F(FixedIpPools, ARestartInTheSamePoolKeepsTheAddress) {
    const std::string first = add("c1", "alpha");
    EXPECT_EQ(first, "10.60.0.10/24");
    del("c1", "alpha");
    EXPECT_EQ(add("c2", "alpha"), first);
    EXPECT_EQ(claims("pool/alpha").size(), 1u);
    verify_clean("pool/alpha");
}

TEST_F(FixedIpPools, WhenThePodsPoolChangesTheOldClaimIsReleased) {
    add("c1", "alpha");
    del("c1", "alpha");
    const std::string moved = add("c2", "beta");
    EXPECT_EQ(moved.rfind("10.61.0.", 0), 0u) << moved;
    EXPECT_TRUE(claims("pool/alpha").empty());
    EXPECT_EQ(claims("pool/beta").size(), 1u);
    del("c2", "beta");
    EXPECT_EQ(add("c3", "beta"), moved);
    verify_clean("pool/alpha");
    verify_clean("pool/beta");
}

TEST_F(FixedIpPools, AnAddressExcludedMeanwhileIsKeptInUseAndReplacedAtTheNextStart) {
    const std::string first = add("c1", "alpha");
    write_pools("10.60.0.10");
    // In use: CHECK still finds it; the pool's new rule does not take it from a running pod.
    json check = config("alpha");
    check["prevResult"] = {{"cniVersion", "1.1.0"}, {"ips", json::array({{{"address", first}}})}};
    auto r = run_plugin(env("CHECK", "c1"), check.dump());
    EXPECT_EQ(r.exit_code, 0) << r.out;
    del("c1", "alpha");
    const std::string next = add("c2", "alpha");
    EXPECT_NE(next, first);
    EXPECT_EQ(next.rfind("10.60.0.", 0), 0u) << next;
    ASSERT_EQ(claims("pool/alpha").size(), 1u);
    EXPECT_EQ(claims("pool/alpha")[0]["addresses"][0], next.substr(0, next.find('/')));
    verify_clean("pool/alpha");
}

// Guards against: the pool-change cleanup matched claims by their display key, which is cut
// at 71 characters: a StatefulSet with long names kept its old pool's claim for ever.
TEST_F(FixedIpPools, WhenThePodsPoolChangesTheOldClaimIsReleasedWhateverTheNamesLength) {
    ns = std::string(50, 'n');
    pod = "db-" + std::string(50, 'p');
    add("c1", "alpha");
    del("c1", "alpha");
    add("c2", "beta");
    EXPECT_TRUE(claims("pool/alpha").empty()) << claims("pool/alpha");
    EXPECT_EQ(claims("pool/beta").size(), 1u);
    verify_clean("pool/alpha");
    // The operator names it as well, with or without the interface.
    const std::string name = ns + "/" + pod;
    auto busy = run_ctl({"--run-dir", dir.sub("run"), "release", "--claim", name});
    EXPECT_NE(busy.out.find("in use by c2"), std::string::npos) << busy.out << busy.err;
    del("c2", "beta");
    auto dry = run_ctl({"--run-dir", dir.sub("run"), "release", "--claim", name});
    EXPECT_NE(dry.out.find("would release"), std::string::npos) << dry.out << dry.err;
    auto done = run_ctl(
        {"--run-dir", dir.sub("run"), "release", "--claim", name, "--ifname", "eth0", "--apply"});
    EXPECT_EQ(done.exit_code, 0) << done.out << done.err;
    EXPECT_TRUE(claims("pool/beta").empty());
}

}  // namespace
}  // namespace shmipam::testing
