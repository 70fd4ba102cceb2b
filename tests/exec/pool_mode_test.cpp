// Pool mode driven as a runtime drives it: real pool files, pod annotations in runtimeConfig,
// real plugin processes. docs/pools.md.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <set>

#include "tests/support/plugin_runner.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

using nlohmann::json;

const char* kPools = R"(apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderIPPool
metadata: {name: small}
spec:
  subnet: 10.40.0.0/24
  ips: ["10.40.0.10-10.40.0.12"]
  gateway: 10.40.0.1
  routes: [{dst: 10.99.0.0/16, gw: 10.40.0.1}]
---
apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderIPPool
metadata: {name: big}
spec: {subnet: 10.41.0.0/16, ips: ["10.41.0.10-10.41.3.200"], gateway: 10.41.0.1, default: true}
---
apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderIPPool
metadata: {name: six}
spec: {subnet: "fd00:40::/64", ips: ["fd00:40::10-fd00:40::ffff"], gateway: "fd00:40::1", default: true}
)";

class PoolMode : public ::testing::Test {
  protected:
    TempDir dir;
    void SetUp() override { write_pools("pools.yaml", kPools); }
    void write_pools(const std::string& file, const std::string& text) {
        ::mkdir(dir.sub("pools").c_str(), 0755);
        write_file(dir.sub("pools") + "/" + file, text);
    }
    json config(const std::string& network = "net", const std::string& annotations = "") {
        json c = {{"cniVersion", "1.1.0"},
                  {"name", network},
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
    static std::map<std::string, std::string> env(const std::string& cmd, const std::string& id,
                                                  const std::string& ifname = "eth0") {
        return cni_env(cmd, id, ifname,
                       "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=pod-" + id);
    }
    int verify(const std::string& state) {
        auto r = run_ctl({"--run-dir", dir.sub("run") + "/_pools", "verify", state});
        EXPECT_EQ(r.exit_code, 0) << state << ": " << r.out << r.err;
        return r.exit_code;
    }
};

// A SpiderIPPool of one address, as a file's text.
std::string one_address_pool(const std::string& name, const std::string& subnet,
                             const std::string& ip) {
    return "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\nmetadata: {name: " +
           name + "}\nspec: {subnet: " + subnet + ", ips: [\"" + ip + "\"]}\n";
}

std::vector<std::string> addresses(const ProcessResult& r) {
    std::vector<std::string> out;
    const json doc = r.json();
    for (const auto& ip : doc["ips"]) out.push_back(ip["address"]);
    return out;
}

TEST_F(PoolMode, AnAnnotatedPodGetsOneAddressPerFamilyWithGatewaysAndRoutes) {
    const json cfg = config(
        "net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"small\"], \"ipv6\": [\"six\"]}",
                          "ipam.spidernet.io/routes": "[{\"dst\": \"10.77.0.0/16\", \"gw\": \"10.40.0.1\"}]"})");
    auto add = run_plugin(env("ADD", "c1"), cfg.dump());
    ASSERT_EQ(add.exit_code, 0) << add.out << add.err;
    const json r = add.json();
    EXPECT_EQ(addresses(add), (std::vector<std::string>{"10.40.0.10/24", "fd00:40::10/64"}));
    EXPECT_EQ(r["ips"][0]["gateway"], "10.40.0.1");
    EXPECT_EQ(r["ips"][1]["gateway"], "fd00:40::1");
    EXPECT_EQ(r["routes"], json::parse(R"([{"dst":"10.99.0.0/16","gw":"10.40.0.1"},
        {"dst":"0.0.0.0/0","gw":"10.40.0.1"},{"dst":"::/0","gw":"fd00:40::1"},
        {"dst":"10.77.0.0/16","gw":"10.40.0.1"}])"));
    // clean_gateway drops the default routes, not the gateways.
    json clean = cfg;
    clean["ipam"]["clean_gateway"] = true;
    auto add2 = run_plugin(env("ADD", "c2"), clean.dump());
    ASSERT_EQ(add2.exit_code, 0) << add2.out;
    const json r2 = add2.json();
    for (const auto& route : r2["routes"]) EXPECT_NE(route["dst"], "0.0.0.0/0");
    EXPECT_EQ(add2.json()["ips"][0]["gateway"], "10.40.0.1");
    verify("ippool_small");
    verify("ippool_six");
}

TEST_F(PoolMode, AnExhaustedPoolFallsThroughAndTheLastOneSaysWhyForEachPool) {
    const json cfg =
        config("net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"small\", \"big\"]}"})");
    std::vector<std::string> got;
    for (int i = 0; i < 4; ++i) {
        auto add = run_plugin(env("ADD", "c" + std::to_string(i)), cfg.dump());
        ASSERT_EQ(add.exit_code, 0) << add.out;
        got.push_back(addresses(add)[0]);
    }
    EXPECT_EQ(got, (std::vector<std::string>{"10.40.0.10/24", "10.40.0.11/24", "10.40.0.12/24",
                                             "10.41.0.10/16"}));
    const json only_small =
        config("net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"small\"]}"})");
    auto full = run_plugin(env("ADD", "c9"), only_small.dump());
    ASSERT_NE(full.exit_code, 0);
    EXPECT_EQ(full.json()["code"], 100) << full.out;
    const std::string msg = full.json()["msg"];
    EXPECT_NE(msg.find("failed to allocate any IPv4 IP address to NIC eth0 from IPPools [small]"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("all IP addresses used out of small"), std::string::npos) << msg;
    EXPECT_NE(
        full.json()["details"].get<std::string>().find("pod annotation ipam.spidernet.io/ippool"),
        std::string::npos)
        << full.out;
}

TEST_F(PoolMode, ARepeatedAddAnswersWhatTheAttachmentHoldsEvenAfterItsPoolIsDisabled) {
    const json cfg =
        config("net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"small\", \"big\"]}"})");
    auto first = run_plugin(env("ADD", "c1"), cfg.dump());
    ASSERT_EQ(first.exit_code, 0) << first.out;
    std::string text = kPools;
    text.replace(text.find("gateway: 10.40.0.1\n"), 19, "gateway: 10.40.0.1\n  disable: true\n");
    write_pools("pools.yaml", text);
    auto again = run_plugin(env("ADD", "c1"), cfg.dump());
    ASSERT_EQ(again.exit_code, 0) << again.out;
    EXPECT_EQ(addresses(again), addresses(first));
    // A new pod now gets `big`; a DEL of the first releases from the disabled pool.
    auto other = run_plugin(env("ADD", "c2"), cfg.dump());
    EXPECT_EQ(addresses(other), std::vector<std::string>{"10.41.0.10/16"});
    ASSERT_EQ(run_plugin(env("DEL", "c1"), cfg.dump()).exit_code, 0);
    write_pools("pools.yaml", kPools);
    // Next-fit: after .11 and .12 (c2 took `big`), the released .10 comes round again.
    auto c3 = run_plugin(env("ADD", "c3"), cfg.dump());
    EXPECT_EQ(addresses(c3), std::vector<std::string>{"10.40.0.11/24"}) << c3.out;
    auto c4 = run_plugin(env("ADD", "c4"), cfg.dump());
    EXPECT_EQ(addresses(c4), std::vector<std::string>{"10.40.0.12/24"}) << c4.out;
    auto c5 = run_plugin(env("ADD", "c5"), cfg.dump());
    EXPECT_EQ(addresses(c5), std::vector<std::string>{"10.40.0.10/24"}) << c5.out;
    verify("ippool_small");
}

TEST_F(PoolMode, ARepeatedAddFindsItsAddressOutsideItsCandidatesWhenTheirStatesExist) {
    // An ADD lists the pool states only when its candidates' states are not all there are
    // (pool_states, `likely`): here `big`'s state exists and `small`'s holds the attachment.
    const json in_small =
        config("net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"small\"]}"})");
    const json in_big = config("net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"big\"]}"})");
    auto first = run_plugin(env("ADD", "c1"), in_small.dump());
    ASSERT_EQ(addresses(first), std::vector<std::string>{"10.40.0.10/24"}) << first.out;
    ASSERT_EQ(run_plugin(env("ADD", "c2"), in_big.dump()).exit_code, 0);
    auto again = run_plugin(env("ADD", "c1"), in_big.dump());
    EXPECT_EQ(addresses(again), addresses(first)) << again.out;
    auto dump = run_ctl({"--run-dir", dir.sub("run") + "/_pools", "dump", "ippool_big", "--json"});
    EXPECT_EQ(dump.json()["allocations"].size(), 1u) << "c1 took nothing from big: " << dump.out;
}

TEST_F(PoolMode, DelReleasesFromAPoolWhoseFileWasDeleted) {
    write_pools("extra.yaml", one_address_pool("temp", "10.42.0.0/24", "10.42.0.5"));
    const json cfg = config("net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"temp\"]}"})");
    ASSERT_EQ(run_plugin(env("ADD", "c1"), cfg.dump()).exit_code, 0);
    ASSERT_EQ(::unlink((dir.sub("pools") + "/extra.yaml").c_str()), 0);
    auto check = run_plugin(env("CHECK", "c1"), cfg.dump());
    EXPECT_EQ(check.exit_code, 0) << check.out;
    ASSERT_EQ(run_plugin(env("DEL", "c1"), cfg.dump()).exit_code, 0);
    check = run_plugin(env("CHECK", "c1"), cfg.dump());
    EXPECT_EQ(check.json()["code"], 110) << check.out;
    auto dump = run_ctl({"--run-dir", dir.sub("run") + "/_pools", "dump", "ippool_temp", "--json"});
    ASSERT_EQ(dump.json()["allocations"].size(), 1u) << dump.out;
    EXPECT_EQ(dump.json()["allocations"][0]["state"], "cooling");
    verify("ippool_temp");
}

// shmipamctl ls shows the ranges a pool allocates from at all times: a DEL (which opens the
// state to release, over the pool's whole subnet) once made it show the whole subnet until the
// next ADD, and a withdrawn pool's state 0.0.0.0/32 [0.0.0.0-255.255.255.255].
TEST_F(PoolMode, LsShowsThePoolsRealRangesAfterADelAndSaysWhenThePoolIsGone) {
    write_pools("extra.yaml", one_address_pool("temp", "10.42.0.0/24", "10.42.0.5"));
    const json small = config("net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"small\"]}"})");
    const json temp = config("net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"temp\"]}"})");
    ASSERT_EQ(run_plugin(env("ADD", "c1"), small.dump()).exit_code, 0);
    ASSERT_EQ(run_plugin(env("ADD", "c2"), temp.dump()).exit_code, 0);
    ASSERT_EQ(run_plugin(env("DEL", "c1"), small.dump()).exit_code, 0);
    auto ls = run_ctl({"--run-dir", dir.sub("run") + "/_pools", "ls"});
    EXPECT_NE(ls.out.find("10.40.0.0/24 [10.40.0.10-10.40.0.12]"), std::string::npos) << ls.out;
    EXPECT_EQ(ls.out.find("10.40.0.0-10.40.0.255"), std::string::npos) << ls.out;
    EXPECT_EQ(ls.out.find("withdrawn"), std::string::npos) << ls.out;
    // The pool's file goes; a DEL releases from its state and marks it.
    ASSERT_EQ(::unlink((dir.sub("pools") + "/extra.yaml").c_str()), 0);
    ASSERT_EQ(run_plugin(env("DEL", "c2"), temp.dump()).exit_code, 0);
    ls = run_ctl({"--run-dir", dir.sub("run") + "/_pools", "ls"});
    EXPECT_NE(ls.out.find("10.42.0.0/24 [10.42.0.5-10.42.0.5] (withdrawn: no longer configured)"),
              std::string::npos)
        << ls.out;
    EXPECT_EQ(ls.out.find("0.0.0.0/32"), std::string::npos) << ls.out;
    // Back in the directory, the next ADD shows it configured again.
    write_pools("extra.yaml", one_address_pool("temp", "10.42.0.0/24", "10.42.0.5"));
    ASSERT_EQ(run_plugin(env("ADD", "c3"), temp.dump()).exit_code, 0);
    ls = run_ctl({"--run-dir", dir.sub("run") + "/_pools", "ls"});
    EXPECT_EQ(ls.out.find("withdrawn"), std::string::npos) << ls.out;
    verify("ippool_temp");
}

TEST_F(PoolMode, EditingAPoolKeepsLiveAllocationsAndANewlyExcludedAddressIsNotReused) {
    const json cfg = config("net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"small\"]}"})");
    for (const char* id : {"c1", "c2", "c3"})
        ASSERT_EQ(run_plugin(env("ADD", id), cfg.dump()).exit_code, 0);
    // Grow the pool and exclude an address in use (.11, held by c2).
    std::string text = kPools;
    const std::string old_ips = "ips: [\"10.40.0.10-10.40.0.12\"]";
    text.replace(text.find(old_ips), old_ips.size(),
                 "ips: [\"10.40.0.10-10.40.0.14\"]\n  excludeIPs: [10.40.0.11]");
    write_pools("pools.yaml", text);
    auto c2 = run_plugin(env("ADD", "c2"), cfg.dump());
    EXPECT_EQ(addresses(c2), std::vector<std::string>{"10.40.0.11/24"}) << "kept until released";
    ASSERT_EQ(run_plugin(env("DEL", "c2"), cfg.dump()).exit_code, 0);
    std::set<std::string> next;
    for (const char* id : {"c4", "c5"}) {
        auto r = run_plugin(env("ADD", id), cfg.dump());
        ASSERT_EQ(r.exit_code, 0) << r.out;
        next.insert(addresses(r)[0]);
    }
    EXPECT_EQ(next, (std::set<std::string>{"10.40.0.13/24", "10.40.0.14/24"}));
    auto full = run_plugin(env("ADD", "c6"), cfg.dump());
    EXPECT_EQ(full.json()["code"], 100)
        << "the excluded .11 is never handed out again: " << full.out;
    verify("ippool_small");
}

TEST_F(PoolMode, TwoNetworksSharingAPoolNeverHandOutOneAddressTwiceUnder200ConcurrentAdds) {
    const json a = config("net-a", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"big\"]}"})");
    const json b = config("net-b", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"big\"]}"})");
    std::vector<std::unique_ptr<Child>> kids;
    for (int i = 0; i < 200; ++i) {
        const json& cfg = i % 2 ? a : b;
        kids.push_back(std::make_unique<Child>(std::vector<std::string>{SHMIPAM_PLUGIN_PATH},
                                               env("ADD", "pod" + std::to_string(i)), cfg.dump()));
    }
    std::set<std::string> seen;
    for (auto& k : kids) {
        auto r = k->wait();
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
        EXPECT_TRUE(seen.insert(addresses(r)[0]).second) << "duplicate " << addresses(r)[0];
    }
    EXPECT_EQ(seen.size(), 200u);
    verify("ippool_big");
}

TEST_F(PoolMode, PoolEditsUnderLoadNeverDuplicateAndNeverHandOutANewlyExcludedAddress) {
    const json cfg =
        config("net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"small\", \"big\"]}"})");
    // Three waves of 40 concurrent ADDs; while each runs, the pools file is rewritten: `small`
    // grows, then excludes .11 and .12, then gains a pool ahead of it by affinity-free order.
    const std::vector<std::string> edits = {
        "ips: [\"10.40.0.10-10.40.0.30\"]",
        "ips: [\"10.40.0.10-10.40.0.30\"]\n  excludeIPs: [10.40.0.11-10.40.0.12]",
        "ips: [\"10.40.0.10-10.40.0.40\"]\n  excludeIPs: [10.40.0.11-10.40.0.12]"};
    const std::string old_ips = "ips: [\"10.40.0.10-10.40.0.12\"]";
    std::set<std::string> seen;
    int n = 0;
    for (size_t wave = 0; wave < edits.size(); ++wave) {
        std::vector<std::unique_ptr<Child>> kids;
        for (int i = 0; i < 40; ++i) {
            kids.push_back(std::make_unique<Child>(std::vector<std::string>{SHMIPAM_PLUGIN_PATH},
                                                   env("ADD", "w" + std::to_string(n++)),
                                                   cfg.dump()));
            if (i == 20) {
                std::string text = kPools;
                text.replace(text.find(old_ips), old_ips.size(), edits[wave]);
                // Written aside and renamed, as deploy/sync-pools.sh does.
                write_file(dir.sub("pools") + "/.pools.yaml.tmp", text);
                ASSERT_EQ(::rename((dir.sub("pools") + "/.pools.yaml.tmp").c_str(),
                                   (dir.sub("pools") + "/pools.yaml").c_str()),
                          0);
            }
        }
        for (auto& k : kids) {
            auto r = k->wait();
            ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
            const std::string a = addresses(r)[0];
            EXPECT_TRUE(seen.insert(a).second) << "duplicate " << a;
        }
    }
    EXPECT_EQ(seen.size(), 120u);
    verify("ippool_small");
    verify("ippool_big");
    // Release everything in `small`, then fill it again: every address but the excluded two.
    for (int i = 0; i < n; ++i)
        ASSERT_EQ(run_plugin(env("DEL", "w" + std::to_string(i)), cfg.dump()).exit_code, 0);
    const json only_small =
        config("net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"small\"]}"})");
    std::set<std::string> refill;
    for (int i = 0;; ++i) {
        auto r = run_plugin(env("ADD", "f" + std::to_string(i)), only_small.dump());
        if (r.exit_code != 0) {
            EXPECT_EQ(r.json()["code"], 100) << r.out;
            break;
        }
        refill.insert(addresses(r)[0]);
    }
    EXPECT_EQ(refill.size(), 29u) << ".10-.40 less .11 and .12";
    EXPECT_EQ(refill.count("10.40.0.11/24") + refill.count("10.40.0.12/24"), 0u);
}

TEST_F(PoolMode, GcOfOneNetworkNeverReleasesAnotherNetworksAttachmentInASharedPool) {
    const json a = config("net-a", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"small\"]}"})");
    const json b = config("net-b", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"small\"]}"})");
    ASSERT_EQ(run_plugin(env("ADD", "a1"), a.dump()).exit_code, 0);
    ASSERT_EQ(run_plugin(env("ADD", "a2"), a.dump()).exit_code, 0);
    ASSERT_EQ(run_plugin(env("ADD", "b1"), b.dump()).exit_code, 0);
    json gc = a;
    gc["cni.dev/valid-attachments"] = json::parse(R"([{"containerID": "a1", "ifname": "eth0"}])");
    auto r = run_plugin({{"CNI_COMMAND", "GC"}, {"CNI_PATH", "/x"}}, gc.dump());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(run_plugin(env("CHECK", "a1"), a.dump()).exit_code, 0);
    EXPECT_EQ(run_plugin(env("CHECK", "a2"), a.dump()).json()["code"], 110) << "a2 was collected";
    EXPECT_EQ(run_plugin(env("CHECK", "b1"), b.dump()).exit_code, 0)
        << "net-b's attachment is not net-a's to collect";
    verify("ippool_small");
}

TEST_F(PoolMode, SelectionByNamespaceNodeAndPodLabels) {
    write_pools("cluster.yaml", R"(apiVersion: v1
kind: Namespace
metadata: {name: team, annotations: {ipam.spidernet.io/default-ipv4-ippool: '["rack-*"]'}}
---
apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {rack: r1}}
---
apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderIPPool
metadata: {name: rack-1}
spec: {subnet: 10.50.0.0/24, ips: ["10.50.0.10-10.50.0.20"], nodeAffinity: {matchLabels: {rack: r1}}}
---
apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderIPPool
metadata: {name: rack-2}
spec: {subnet: 10.51.0.0/24, ips: ["10.51.0.10-10.51.0.20"], nodeAffinity: {matchLabels: {rack: r2}}}
---
apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderIPPool
metadata: {name: rack-db}
spec: {subnet: 10.52.0.0/24, ips: ["10.52.0.10-10.52.0.20"], podAffinity: {matchLabels: {app: db}}}
)");
    json cfg = config();
    auto env_team =
        cni_env("ADD", "t1", "eth0", "IgnoreUnknown=1;K8S_POD_NAMESPACE=team;K8S_POD_NAME=web");
    auto web = run_plugin(env_team, cfg.dump());
    ASSERT_EQ(web.exit_code, 0) << web.out;
    EXPECT_EQ(addresses(web), std::vector<std::string>{"10.50.0.10/24"});
    cfg["args"]["cni"]["labels"] = json::parse(R"([{"key": "app", "value": "db"}])");
    env_team["CNI_CONTAINERID"] = "t2";
    auto db = run_plugin(env_team, cfg.dump());
    ASSERT_EQ(db.exit_code, 0) << db.out;
    EXPECT_EQ(addresses(db), std::vector<std::string>{"10.52.0.10/24"})
        << "podAffinity sorts first";
    // On another node neither rack pool serves a web pod: every one is filtered, and said so.
    cfg["ipam"]["nodeName"] = "node-b";
    cfg["args"]["cni"]["labels"] = json::array();
    env_team["CNI_CONTAINERID"] = "t3";
    auto none = run_plugin(env_team, cfg.dump());
    EXPECT_EQ(none.json()["code"], 121) << none.out;
    const std::string msg = none.json()["msg"];
    EXPECT_NE(msg.find("unmatched Node affinity of IPPool rack-1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unmatched Pod affinity of IPPool rack-db"), std::string::npos) << msg;
}

TEST_F(PoolMode, BadPoolFilesAndAnnotationsGetClearErrorsAndLeaveTheRestServing) {
    write_pools("broken.yaml",
                "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
                "metadata: {name: broken}\nspec: {subnet: 10.60.0.0/24, ips: [10.61.0.1]}\n");
    write_pools("garbage.yaml", "{{{ not yaml");
    const json good = config("net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"small\"]}"})");
    auto ok = run_plugin(env("ADD", "c1"), good.dump());
    ASSERT_EQ(ok.exit_code, 0) << ok.out;
    const json broken =
        config("net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"broken\"]}"})");
    auto r = run_plugin(env("ADD", "c2"), broken.dump());
    EXPECT_EQ(r.json()["code"], 122) << r.out;
    EXPECT_NE(r.json()["msg"].get<std::string>().find("broken.yaml"), std::string::npos) << r.out;
    const json bad_json = config("net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"small\""})");
    r = run_plugin(env("ADD", "c3"), bad_json.dump());
    EXPECT_EQ(r.json()["code"], 120) << r.out;
    const json unknown = config("net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"nope\"]}"})");
    r = run_plugin(env("ADD", "c4"), unknown.dump());
    EXPECT_EQ(r.json()["code"], 122) << r.out;
    // None of the failures took an address.
    auto dump =
        run_ctl({"--run-dir", dir.sub("run") + "/_pools", "dump", "ippool_small", "--json"});
    EXPECT_EQ(dump.json()["allocations"].size(), 1u) << dump.out;
    verify("ippool_small");
}

TEST_F(PoolMode, TheCompiledSnapshotFollowsEveryEditAndADamagedOneIsIgnored) {
    // Files older than the two-second racy window: the first ADD writes the snapshot.
    ::sleep(3);
    const json cfg =
        config("net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"small\", \"big\"]}"})");
    auto first = run_plugin(env("ADD", "c1"), cfg.dump());
    ASSERT_EQ(addresses(first), std::vector<std::string>{"10.40.0.10/24"}) << first.out;
    std::vector<std::string> snapshots;
    if (DIR* d = ::opendir((dir.sub("run") + "/_pools").c_str())) {
        while (dirent* e = ::readdir(d)) {
            if (std::string(e->d_name).rfind("catalog-", 0) == 0) snapshots.push_back(e->d_name);
        }
        ::closedir(d);
    }
    ASSERT_EQ(snapshots.size(), 1u) << "the snapshot was written";
    const std::string snap = dir.sub("run") + "/_pools/" + snapshots[0];
    // An edit (same size, so only the timestamps tell) is seen by the next call.
    std::string text = kPools;
    text.replace(text.find("name: small}"), 12, "name: smalx}");
    write_pools("pools.yaml", text);
    auto second = run_plugin(env("ADD", "c2"), cfg.dump());
    EXPECT_EQ(second.json()["code"], 122) << "pool small is gone: " << second.out;
    write_pools("pools.yaml", kPools);
    ::sleep(3);
    ASSERT_EQ(run_plugin(env("ADD", "c3"), cfg.dump()).exit_code, 0);
    // A damaged snapshot is read as absent and rewritten.
    write_file(snap, "SHMPCAT2 garbage");
    auto fourth = run_plugin(env("ADD", "c4"), cfg.dump());
    EXPECT_EQ(addresses(fourth), std::vector<std::string>{"10.40.0.12/24"}) << fourth.out;
    EXPECT_NE(read_file(snap).substr(4, 8), " garbage") << "rewritten";
    // A file added beside the others (a snapshot's check stats the directory, never lists it).
    ::sleep(3);
    ASSERT_EQ(run_plugin(env("ADD", "c5"), cfg.dump()).exit_code, 0);
    write_pools("extra.yaml", one_address_pool("extra", "10.44.0.0/24", "10.44.0.7"));
    const json extra = config("net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"extra\"]}"})");
    auto sixth = run_plugin(env("ADD", "c6"), extra.dump());
    EXPECT_EQ(addresses(sixth), std::vector<std::string>{"10.44.0.7/24"}) << sixth.out;
}

TEST_F(PoolMode, ShmipamctlExplainsASelectionAndListsPoolStates) {
    write_pools("more.yaml", R"(apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderIPPool
metadata: {name: off}
spec: {subnet: 10.43.0.0/24, ips: ["10.43.0.5-10.43.0.9"], disable: true}
)");
    json cfg = config();
    cfg["ipam"]["default_ipv4_ippool"] = json::array({"off", "small"});
    write_file(dir.sub("net.conf"), cfg.dump());
    auto r = run_ctl({"explain", "--config", dir.sub("net.conf"), "--pod", "web", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const json e = r.json();
    EXPECT_EQ(e["rule"], "CNI config default_ipv4_ippool / default_ipv6_ippool");
    ASSERT_EQ(e["families"].size(), 1u);
    EXPECT_EQ(e["families"][0]["filtered"][0]["reason"], "disabled IPPool off");
    EXPECT_EQ(e["families"][0]["order"][0]["name"], "small");
    EXPECT_EQ(e["families"][0]["order"][0]["allocatable"], "3");
    // An annotation overrides the config; a pod the ADD would refuse exits 1 and says why.
    r = run_ctl({"explain", "--config", dir.sub("net.conf"), "--annotation",
                 R"(ipam.spidernet.io/ippool={"ipv4": ["off"]})"});
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("all IPv4 IPPools [off] of eth0 filtered out: [disabled IPPool off]"),
              std::string::npos)
        << r.out;
    // The annotations a runtime passes in the config are read too.
    json annotated = config("net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"big\"]}"})");
    write_file(dir.sub("annotated.conf"), annotated.dump());
    r = run_ctl({"explain", "--config", dir.sub("annotated.conf"), "--json"});
    EXPECT_EQ(r.json()["rule"], "pod annotation ipam.spidernet.io/ippool") << r.out;
    // The plugin agrees.
    ASSERT_EQ(run_plugin(env("ADD", "c1"), cfg.dump()).exit_code, 0);
    auto ls = run_ctl({"--run-dir", dir.sub("run"), "ls"});
    EXPECT_NE(ls.out.find("pool/small"), std::string::npos) << ls.out;
    auto dump = run_ctl({"--run-dir", dir.sub("run"), "dump", "pool/small", "--json"});
    EXPECT_EQ(dump.json()["allocations"].size(), 1u) << dump.out;
    EXPECT_EQ(run_ctl({"--run-dir", dir.sub("run"), "verify", "pool/../x"}).exit_code, 2);
}

TEST_F(PoolMode, BadPoolConfigFieldsAndPodMetadataAreRefusedAndTakeNothing) {
    struct Case {
        const char* name;
        std::function<void(json&)> spoil;
        int code;
        const char* words;
    };
    const std::vector<Case> cases = {
        {"poolsDir not a string", [](json& c) { c["ipam"]["poolsDir"] = 5; }, 6, "ipam.poolsDir"},
        {"default pools not a list", [](json& c) { c["ipam"]["default_ipv4_ippool"] = "small"; }, 6,
         "ipam.default_ipv4_ippool"},
        {"default pool not a name",
         [](json& c) { c["ipam"]["default_ipv6_ippool"] = json::array({1}); }, 6,
         "ipam.default_ipv6_ippool"},
        {"clean_gateway not a boolean", [](json& c) { c["ipam"]["clean_gateway"] = "yes"; }, 6,
         "ipam.clean_gateway"},
        {"nodeName not a string", [](json& c) { c["ipam"]["nodeName"] = json::array(); }, 6,
         "ipam.nodeName"},
        {"multusNamespace not a string", [](json& c) { c["ipam"]["multusNamespace"] = 1; }, 6,
         "ipam.multusNamespace"},
        {"pod annotations not an object",
         [](json& c) { c["runtimeConfig"]["io.kubernetes.cri.pod-annotations"] = "x"; }, 6,
         "io.kubernetes.cri.pod-annotations"},
        {"pod annotation not a string",
         [](json& c) {
             c["runtimeConfig"]["io.kubernetes.cri.pod-annotations"] = {{"a", 1}};
         },
         6, "io.kubernetes.cri.pod-annotations.a"},
        {"labels not a list",
         [](json& c) {
             c["args"]["cni"]["labels"] = {{"app", "db"}};
         },
         6, "args.cni.labels"},
        {"label without a value",
         [](json& c) { c["args"]["cni"]["labels"] = json::parse(R"([{"key": "app"}])"); }, 6,
         "args.cni.labels[]"},
    };
    for (const Case& tc : cases) {
        json cfg = config("net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"small\"]}"})");
        tc.spoil(cfg);
        auto r = run_plugin(env("ADD", "bad"), cfg.dump());
        EXPECT_EQ(r.exit_code, 1) << tc.name;
        EXPECT_EQ(r.json()["code"], tc.code) << tc.name << ": " << r.out;
        EXPECT_NE(r.json()["msg"].get<std::string>().find(tc.words), std::string::npos)
            << tc.name << ": " << r.out;
    }
    // None of them created or touched a pool state.
    EXPECT_NE(::access((dir.sub("run") + "/_pools/ippool_small").c_str(), F_OK), 0);
    // Ranges mode reads the pod metadata too (a fixed address is asked for by annotation,
    // docs/fixed-ips.md): the same bad shapes are refused there, with the same code.
    json ranges = make_config(dir.path(), "plain");
    ranges["runtimeConfig"]["io.kubernetes.cri.pod-annotations"] = "x";
    auto r = run_plugin(env("ADD", "plain"), ranges.dump());
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.json()["code"], 6) << r.out;
    ranges = make_config(dir.path(), "plain");
    EXPECT_EQ(run_plugin(env("ADD", "plain"), ranges.dump()).exit_code, 0);
}

// The name a node claims blocks under must be its Node object's: `cluster gc` compares it with
// the cluster's node list. A host name differs in case or domain, so cluster mode never falls
// back to it: without ipam.nodeName or the install container's file, every command is refused
// before any state is made, saying how to set it.
TEST_F(PoolMode, ClusterModeWithoutANodeNameIsRefusedSayingHowAndNeverUsesTheHostName) {
    json c = config();
    c["ipam"].erase("nodeName");
    c["ipam"]["etcd"] = {{"endpoints", {"http://127.0.0.1:1"}}, {"budgetMs", 100}};
    c["ipam"]["nodeNameFile"] = dir.sub("nodename");
    for (const char* cmd : {"ADD", "DEL"}) {
        auto r = run_plugin(env(cmd, "c1"), c.dump());
        EXPECT_EQ(r.exit_code, 1) << cmd;
        EXPECT_EQ(r.json()["code"], 7) << r.out;
        const std::string msg = r.json()["msg"];
        EXPECT_NE(msg.find("ipam.nodeName"), std::string::npos) << msg;
        EXPECT_NE(msg.find(dir.sub("nodename")), std::string::npos) << msg;
        EXPECT_NE(msg.find("--node-name"), std::string::npos) << msg;
    }
    write_file(dir.sub("nodename"), "  \n");
    auto blank = run_plugin(env("ADD", "c1"), c.dump());
    EXPECT_EQ(blank.json()["code"], 7) << blank.out;
    EXPECT_NE(blank.json()["details"].get<std::string>().find("holds no node name"),
              std::string::npos)
        << blank.out;
    struct stat st {};
    EXPECT_NE(::stat(dir.sub("data").c_str(), &st), 0) << "no state made for a refused config";
    EXPECT_NE(::stat(dir.sub("run").c_str(), &st), 0) << "no state made for a refused config";
}

TEST_F(PoolMode, PoolsDirBesideRangesIsAnError) {
    json cfg = config();
    cfg["ipam"]["ranges"] = json::parse(R"([[{"subnet": "10.9.0.0/24"}]])");
    auto r = run_plugin(env("ADD", "c1"), cfg.dump());
    EXPECT_EQ(r.json()["code"], 7) << r.out;
    EXPECT_NE(r.json()["msg"].get<std::string>().find("poolsDir and ranges cannot both be set"),
              std::string::npos);
    cfg = config();
    cfg["ipam"]["poolsDir"] = dir.sub("missing");
    r = run_plugin(env("ADD", "c1"), cfg.dump());
    EXPECT_EQ(r.json()["code"], 7) << r.out;
}

TEST_F(PoolMode, AFailedSecondFamilyUndoesTheFirst) {
    write_pools("six-full.yaml", R"(apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderIPPool
metadata: {name: six-one}
spec: {subnet: "fd00:41::/64", ips: ["fd00:41::10"]}
)");
    const json cfg = config(
        "net",
        R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"small\"], \"ipv6\": [\"six-one\"]}"})");
    ASSERT_EQ(run_plugin(env("ADD", "c1"), cfg.dump()).exit_code, 0);
    auto second = run_plugin(env("ADD", "c2"), cfg.dump());
    ASSERT_EQ(second.json()["code"], 100) << second.out;
    auto dump =
        run_ctl({"--run-dir", dir.sub("run") + "/_pools", "dump", "ippool_small", "--json"});
    size_t held = 0;
    const json doc = dump.json();
    for (const auto& a : doc["allocations"]) held += a["state"] == "allocated";
    EXPECT_EQ(held, 1u) << "the IPv4 address of the failed ADD was released: " << dump.out;
}

// An alias bomb beside a good pool file: unbounded, an ADD of the network would parse it without
// end (19.8 GB resident, no answer in 60 s); bounded, it is refused once, naming the bound.
TEST_F(PoolMode, AnAliasBombFileIsRefusedOnceAndTheGoodPoolsKeepServingQuickly) {
    std::string bomb =
        "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
        "metadata:\n  name: bomb\n  labels:\n"
        "    a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n";
    for (char c = 'b'; c <= 'j'; ++c) {
        bomb += std::string("    ") + c + ": &" + c + " [";
        for (int i = 0; i < 10; ++i) bomb += std::string(i ? "," : "") + "*" + char(c - 1);
        bomb += "]\n";
    }
    write_pools("bomb.yaml", bomb + "spec:\n  subnet: 10.77.0.0/24\n");
    ::sleep(3);  // older than the racy window: the first ADD writes the snapshot
    const json cfg = config("net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"small\"]}"})");
    // Bounded, the bomb's parse takes about 0.1 s (docs/pools.md); unbounded, this ADD gave no
    // answer in 60 s: half of that tells the two apart on any machine.
    constexpr auto kFarBelowUnbounded = std::chrono::seconds(30);
    const auto start = std::chrono::steady_clock::now();
    auto first = run_plugin(env("ADD", "c1"), cfg.dump());
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_LT(took, kFarBelowUnbounded);
    std::printf("[ bomb     ] the ADD that met the bomb took %.3f s\n",
                std::chrono::duration<double>(took).count());
    ASSERT_EQ(addresses(first), std::vector<std::string>{"10.40.0.10/24"}) << first.out;
    std::string snap;
    if (DIR* d = ::opendir((dir.sub("run") + "/_pools").c_str())) {
        while (dirent* e = ::readdir(d)) {
            if (std::string(e->d_name).rfind("catalog-", 0) == 0)
                snap = dir.sub("run") + "/_pools/" + e->d_name;
        }
        ::closedir(d);
    }
    ASSERT_FALSE(snap.empty()) << "a directory with a refused file still gets its snapshot";
    EXPECT_NE(read_file(snap).find("bomb.yaml: expands to more than 1,000,000 YAML nodes (the "
                                   "bound for one pool file)"),
              std::string::npos);
    struct stat before {};
    ASSERT_EQ(::stat(snap.c_str(), &before), 0);
    auto second = run_plugin(env("ADD", "c2"), cfg.dump());
    ASSERT_EQ(addresses(second), std::vector<std::string>{"10.40.0.11/24"}) << second.out;
    struct stat after {};
    ASSERT_EQ(::stat(snap.c_str(), &after), 0);
    EXPECT_EQ(before.st_ino, after.st_ino) << "the second ADD used the snapshot, not the files";
    EXPECT_EQ(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
    // An ADD asking for the bomb's pool: not found, and the details name the refused file.
    const json wants_bomb =
        config("net", R"({"ipam.spidernet.io/ippool": "{\"ipv4\": [\"bomb\"]}"})");
    auto refused = run_plugin(env("ADD", "c3"), wants_bomb.dump());
    EXPECT_EQ(refused.json()["code"], 122) << refused.out;
    EXPECT_NE(refused.json().value("details", "").find("bomb.yaml: expands to more than"),
              std::string::npos)
        << refused.out;
}

}  // namespace
}  // namespace shmipam::testing
