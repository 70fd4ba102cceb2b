// Spiderpool's selection rules, table by table: each rule level, each filter, each sort key, the
// three sort examples of Spiderpool's docs, wildcards, dual stack from one rule, a rule that
// applies but names nothing (no fall-through), and the errors Spiderpool gives.
#include <gtest/gtest.h>

#include "pools/catalog_codec.h"
#include "pools/label_selector.h"
#include "pools/pool_dir.h"
#include "pools/selection.h"

namespace shmipam::pools {
namespace {

using engine::Family;

// A pool as YAML, with `extra` spec lines (indented by 2 under spec).
std::string pool(const std::string& name, const std::string& extra = "",
                 const std::string& subnet = "", const std::string& ips = "") {
    static int n = 0;
    ++n;
    const bool v6 = subnet.find(':') != std::string::npos;
    const std::string s = !subnet.empty() ? subnet : "10." + std::to_string(n) + ".0.0/24";
    const std::string i =
        !ips.empty() ? ips
        : v6         ? s.substr(0, s.find('/')) + "10-" + s.substr(0, s.find('/')) + "20"
                     : "10." + std::to_string(n) + ".0.10-10." + std::to_string(n) + ".0.20";
    return "---\napiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\nmetadata:\n  "
           "name: " +
           name + "\nspec:\n  subnet: " + s + "\n  ips: [\"" + i + "\"]\n" + extra;
}

Catalog catalog_of(const std::string& yaml) {
    Catalog c;
    load_text(c, "pools.yaml", yaml);
    c.finish();
    return c;
}

PodFacts pod_in(const std::string& ns = "default") {
    PodFacts p;
    p.namespace_ = ns;
    p.name = "web-0";
    p.node_name = "node-a";
    p.ifname = "eth0";
    return p;
}

std::vector<std::string> order_of(const Selection& s, Family f) {
    for (const auto& fam : s.families) {
        if (fam.family != f) continue;
        std::vector<std::string> out;
        for (const auto& c : fam.order) out.push_back(c.name);
        return out;
    }
    return {};
}

bool has_family(const Selection& s, Family f) {
    for (const auto& fam : s.families) {
        if (fam.family == f) return true;
    }
    return false;
}

const std::string kV6Pool = pool("v6-a", "", "fd00:a::/64");

// ---- the rule levels -------------------------------------------------------------------------

TEST(PoolRules, ThePodAnnotationIppoolWinsOverEveryDefault) {
    auto c = catalog_of(pool("annotated") + pool("cluster-default", "  default: true\n"));
    PodFacts pod = pod_in();
    pod.annotations[annotation::kIpPool] = R"({"ipv4": ["annotated"]})";
    PoolConfig cfg;
    cfg.default_ipv4_ippool = {"cluster-default"};
    auto s = select_pools(c, pod, cfg);
    ASSERT_FALSE(s.error) << s.error->msg;
    EXPECT_EQ(s.rule, Rule::kIpPoolAnnotation);
    EXPECT_EQ(order_of(s, Family::kV4), std::vector<std::string>{"annotated"});
}

TEST(PoolRules, IppoolsWinsOverIppoolAndTakesTheCurrentInterfacesItem) {
    auto c = catalog_of(pool("p-eth0") + pool("p-net1") + pool("single"));
    PodFacts pod = pod_in();
    pod.ifname = "net1";
    pod.annotations[annotation::kIpPool] = R"({"ipv4": ["single"]})";
    pod.annotations[annotation::kIpPools] =
        R"([{"interface": "eth0", "ipv4": ["p-eth0"]}, {"interface": "net1", "ipv4": ["p-net1"], "cleangateway": true}])";
    auto s = select_pools(c, pod, {});
    ASSERT_FALSE(s.error) << s.error->msg;
    EXPECT_EQ(s.rule, Rule::kIpPoolsAnnotation);
    EXPECT_EQ(order_of(s, Family::kV4), std::vector<std::string>{"p-net1"});
    EXPECT_TRUE(s.clean_gateway);
}

// Spiderpool's unnamed multi-NIC form: items without `interface` are matched by position.
TEST(PoolRules, IppoolsItemsWithoutInterfaceAreMatchedByPosition) {
    auto c = catalog_of(pool("p-first") + pool("p-second") + pool("p-third"));
    const char* unnamed =
        R"([{"ipv4": ["p-first"]}, {"ipv4": ["p-second"]}, {"ipv4": ["p-third"]}])";
    for (const auto& [ifname, want] : std::vector<std::pair<std::string, std::string>>{
             {"eth0", "p-first"}, {"net1", "p-second"}, {"net2", "p-third"}}) {
        PodFacts pod = pod_in();
        pod.ifname = ifname;
        pod.annotations[annotation::kIpPools] = unnamed;
        auto s = select_pools(c, pod, {});
        ASSERT_FALSE(s.error) << ifname << ": " << s.error->msg;
        EXPECT_EQ(order_of(s, Family::kV4), std::vector<std::string>{want}) << ifname;
    }
    PodFacts beyond = pod_in();
    beyond.ifname = "net3";
    beyond.annotations[annotation::kIpPools] = unnamed;
    auto s = select_pools(c, beyond, {});
    ASSERT_TRUE(s.error);
    EXPECT_NE(s.error->msg.find("interfaces do not contain that requested by runtime (net3)"),
              std::string::npos)
        << s.error->msg;
}

TEST(PoolRules, TheSubnetAnnotationWinsOverPoolAnnotations) {
    auto c = catalog_of(
        pool("p1") +
        "---\napiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderSubnet\n"
        "metadata: {name: sub1}\nspec: {subnet: 10.200.0.0/16, ips: [10.200.0.1-10.200.0.100]}\n");
    PodFacts pod = pod_in();
    pod.annotations[annotation::kIpPool] = R"({"ipv4": ["p1"]})";
    pod.annotations[annotation::kSubnet] = R"({"ipv4": ["sub1"]})";
    auto s = select_pools(c, pod, {});
    ASSERT_FALSE(s.error) << s.error->msg;
    EXPECT_EQ(s.rule, Rule::kSubnetAnnotation);
    ASSERT_EQ(s.families.size(), 1u);
    ASSERT_EQ(s.families[0].order.size(), 1u);
    EXPECT_NE(s.families[0].order[0].subnet, nullptr);
    // `subnets` wins over `subnet`.
    pod.annotations[annotation::kSubnets] = R"([{"interface": "eth0", "ipv4": ["sub1"]}])";
    EXPECT_EQ(select_pools(c, pod, {}).rule, Rule::kSubnetsAnnotation);
}

TEST(PoolRules, NamespaceDefaultsWinOverTheConfigAndTheNewerKeyOverTheOlder) {
    auto c =
        catalog_of(pool("ns-new") + pool("ns-old") + pool("from-config") +
                   "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n"
                   "  annotations:\n    ipam.spidernet.io/default-ipv4-ippool: '[\"ns-new\"]'\n"
                   "    ipam.spidernet.io/defaultv4ippool: '[\"ns-old\"]'\n"
                   "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: legacy\n"
                   "  annotations:\n    ipam.spidernet.io/defaultv4ippool: '[\"ns-old\"]'\n");
    PoolConfig cfg;
    cfg.default_ipv4_ippool = {"from-config"};
    auto s = select_pools(c, pod_in("team"), cfg);
    ASSERT_FALSE(s.error) << s.error->msg;
    EXPECT_EQ(s.rule, Rule::kNamespaceDefault);
    EXPECT_EQ(order_of(s, Family::kV4), std::vector<std::string>{"ns-new"});
    auto old = select_pools(c, pod_in("legacy"), cfg);
    EXPECT_EQ(order_of(old, Family::kV4), std::vector<std::string>{"ns-old"});
    auto none = select_pools(c, pod_in("other"), cfg);
    EXPECT_EQ(none.rule, Rule::kConfigDefault);
    EXPECT_EQ(order_of(none, Family::kV4), std::vector<std::string>{"from-config"});
}

TEST(PoolRules, ClusterDefaultsAreTheLastRuleInNameOrderPerFamily) {
    auto c = catalog_of(pool("zeta", "  default: true\n") + pool("alpha", "  default: true\n") +
                        pool("not-default") + pool("v6-def", "  default: true\n", "fd00:1::/64"));
    auto s = select_pools(c, pod_in(), {});
    ASSERT_FALSE(s.error) << s.error->msg;
    EXPECT_EQ(s.rule, Rule::kClusterDefault);
    EXPECT_EQ(order_of(s, Family::kV4), (std::vector<std::string>{"alpha", "zeta"}));
    EXPECT_EQ(order_of(s, Family::kV6), std::vector<std::string>{"v6-def"});
}

TEST(PoolRules, NoRuleAtAllIsAnErrorThatSaysWhatToSet) {
    auto c = catalog_of(pool("p1"));
    auto s = select_pools(c, pod_in(), {});
    ASSERT_TRUE(s.error);
    EXPECT_EQ(s.error->code, Code::kNoPoolAvailable);
    EXPECT_NE(s.error->msg.find("no pool selection rules of any type are specified"),
              std::string::npos);
}

TEST(PoolRules, DualStackComesFromOneRule) {
    auto c = catalog_of(pool("v4") + pool("v6", "", "fd00:2::/64") +
                        pool("v6-default", "  default: true\n", "fd00:3::/64"));
    PodFacts pod = pod_in();
    pod.annotations[annotation::kIpPool] = R"({"ipv4": ["v4"], "ipv6": ["v6"]})";
    auto s = select_pools(c, pod, {});
    ASSERT_FALSE(s.error) << s.error->msg;
    EXPECT_EQ(order_of(s, Family::kV4), std::vector<std::string>{"v4"});
    EXPECT_EQ(order_of(s, Family::kV6), std::vector<std::string>{"v6"});
}

TEST(PoolRules, ARuleThatNamesOnlyIPv4GivesIPv6NothingAndDoesNotFallThrough) {
    auto c = catalog_of(pool("v4") + pool("v6-default", "  default: true\n", "fd00:4::/64"));
    PodFacts pod = pod_in();
    pod.annotations[annotation::kIpPool] = R"({"ipv4": ["v4"]})";
    auto s = select_pools(c, pod, {});
    ASSERT_FALSE(s.error) << s.error->msg;
    EXPECT_TRUE(has_family(s, Family::kV4));
    EXPECT_FALSE(has_family(s, Family::kV6));
}

TEST(PoolRules, AnEmptyAnnotationStopsTheChain) {
    auto c = catalog_of(pool("cluster", "  default: true\n"));
    PodFacts pod = pod_in();
    pod.annotations[annotation::kIpPool] = "{}";
    auto s = select_pools(c, pod, {});
    EXPECT_EQ(s.rule, Rule::kIpPoolAnnotation);
    ASSERT_TRUE(s.error);
    EXPECT_EQ(s.error->code, Code::kNoPoolAvailable);
    EXPECT_TRUE(s.families.empty());
}

TEST(PoolRules, AWildcardMatchingNothingGivesItsFamilyNothing) {
    auto c = catalog_of(pool("v4-a") + pool("cluster", "  default: true\n", "fd00:5::/64"));
    PodFacts pod = pod_in();
    pod.annotations[annotation::kIpPool] = R"({"ipv4": ["v4-*"], "ipv6": ["none-*"]})";
    auto s = select_pools(c, pod, {});
    ASSERT_FALSE(s.error) << s.error->msg;
    EXPECT_EQ(order_of(s, Family::kV4), std::vector<std::string>{"v4-a"});
    EXPECT_FALSE(has_family(s, Family::kV6));
}

TEST(PoolRules, WildcardsExpandPerFamilyInNameOrder) {
    auto c = catalog_of(pool("rack-b") + pool("rack-a") + pool("rack-6", "", "fd00:6::/64") +
                        pool("other"));
    PodFacts pod = pod_in();
    pod.annotations[annotation::kIpPool] = R"({"ipv4": ["rack-?"], "ipv6": ["rack-[0-9]"]})";
    auto s = select_pools(c, pod, {});
    ASSERT_FALSE(s.error) << s.error->msg;
    EXPECT_EQ(order_of(s, Family::kV4), (std::vector<std::string>{"rack-a", "rack-b"}));
    EXPECT_EQ(order_of(s, Family::kV6), std::vector<std::string>{"rack-6"});
}

// ---- errors as Spiderpool gives them ---------------------------------------------------------

struct ErrorCase {
    const char* name;
    const char* key;
    const char* value;
    Code code;
    const char* words;
};

class PoolRuleErrors : public testing::TestWithParam<ErrorCase> {};

TEST_P(PoolRuleErrors, AnswerWithSpiderpoolsWords) {
    const ErrorCase& tc = GetParam();
    auto c = catalog_of(pool("p1") + pool("p2"));
    PodFacts pod = pod_in();
    pod.annotations[tc.key] = tc.value;
    auto s = select_pools(c, pod, {});
    ASSERT_TRUE(s.error) << tc.name;
    EXPECT_EQ(s.error->code, tc.code) << s.error->msg;
    EXPECT_NE(s.error->msg.find(tc.words), std::string::npos) << s.error->msg;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PoolRuleErrors,
    testing::Values(
        ErrorCase{"unknown", annotation::kIpPool, R"({"ipv4": ["nope"]})", Code::kPoolNotFound,
                  "failed to get original IPPool nope"},
        ErrorCase{"duplicate", annotation::kIpPool, R"({"ipv4": ["p1", "p*"]})",
                  Code::kPoolAnnotationInvalid, "duplicate IPPool p1 specified for NIC eth0"},
        ErrorCase{"bad json", annotation::kIpPool, R"({"ipv4": [)", Code::kPoolAnnotationInvalid,
                  "invalid format of Pod annotation 'ipam.spidernet.io/ippool'"},
        ErrorCase{"wrong type", annotation::kIpPool, R"({"ipv4": "p1"})",
                  Code::kPoolAnnotationInvalid, "ipv4 must be a list of names"},
        ErrorCase{"no interface", annotation::kIpPools,
                  R"([{"interface": "net1", "ipv4": ["p1"]}])", Code::kPoolAnnotationInvalid,
                  "interfaces do not contain that requested by runtime"},
        ErrorCase{"interface twice", annotation::kIpPools,
                  R"([{"interface": "eth0", "ipv4": ["p1"]}, {"interface": "eth0"}])",
                  Code::kPoolAnnotationInvalid, "duplicate interface eth0"},
        ErrorCase{"interface missing from a subnets item", annotation::kSubnets,
                  R"([{"ipv4": ["sub1"]}])", Code::kPoolAnnotationInvalid,
                  "interface must be specified"},
        ErrorCase{"unnamed item beside a named one", annotation::kIpPools,
                  R"([{"ipv4": ["p1"]}, {"interface": "eth0", "ipv4": ["p1"]}])",
                  Code::kPoolAnnotationInvalid,
                  "NIC should be either all specified or all unspecified"},
        ErrorCase{"named item beside an unnamed one for another interface", annotation::kIpPools,
                  R"([{"interface": "eth0", "ipv4": ["p1"]}, {"ipv4": ["p2"]}])",
                  Code::kPoolAnnotationInvalid,
                  "NIC should be either all specified or all unspecified"},
        ErrorCase{"empty list", annotation::kIpPools, "[]", Code::kPoolAnnotationInvalid,
                  "value requires at least one item"}),
    [](const auto& info) {
        std::string n = info.param.name;
        for (char& ch : n) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
        return n;
    });

TEST(PoolRules, ABadRoutesAnnotationIsAnError) {
    auto c = catalog_of(pool("p1"));
    PodFacts pod = pod_in();
    pod.annotations[annotation::kIpPool] = R"({"ipv4": ["p1"]})";
    pod.annotations[annotation::kRoutes] = R"([{"dst": "not-a-cidr", "gw": "10.0.0.1"}])";
    auto s = select_pools(c, pod, {});
    ASSERT_TRUE(s.error);
    EXPECT_EQ(s.error->code, Code::kPoolAnnotationInvalid);
    pod.annotations[annotation::kRoutes] = R"([{"dst": "10.9.0.0/16", "gw": "10.1.0.1"}])";
    s = select_pools(c, pod, {});
    ASSERT_FALSE(s.error) << s.error->msg;
    ASSERT_EQ(s.annotation_routes.size(), 1u);
    EXPECT_EQ(s.annotation_routes[0].dst, "10.9.0.0/16");
}

TEST(PoolRules, AMalformedPoolNamedByARuleSaysWhyItIsOutOfService) {
    auto c = catalog_of(pool("good") + pool("broken", "  gateway: 99.0.0.1\n"));
    PodFacts pod = pod_in();
    pod.annotations[annotation::kIpPool] = R"({"ipv4": ["broken"]})";
    auto s = select_pools(c, pod, {});
    ASSERT_TRUE(s.error);
    EXPECT_EQ(s.error->code, Code::kPoolNotFound);
    EXPECT_NE(s.error->msg.find("IPPool broken is out of service"), std::string::npos)
        << s.error->msg;
    EXPECT_NE(s.error->msg.find("pools.yaml"), std::string::npos) << s.error->msg;
}

// ---- filters ---------------------------------------------------------------------------------

struct FilterCase {
    const char* name;
    std::string spec;  // extra spec lines of the filtered pool "f"
    const char* words;
};

class PoolFilters : public testing::TestWithParam<FilterCase> {};

TEST_P(PoolFilters, RemoveAPoolThatDoesNotServeThePodAndSayWhy) {
    const FilterCase& tc = GetParam();
    const std::string objects =
        "---\napiVersion: v1\nkind: Node\nmetadata: {name: node-a, labels: {zone: east}}\n"
        "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: default, labels: {team: blue}}\n";
    auto c = catalog_of(objects + pool("f", tc.spec) + pool("ok"));
    PodFacts pod = pod_in();
    pod.labels["app"] = "web";
    pod.annotations[annotation::kIpPool] = R"({"ipv4": ["f", "ok"]})";
    auto s = select_pools(c, pod, {});
    ASSERT_FALSE(s.error) << s.error->msg;
    EXPECT_EQ(order_of(s, Family::kV4), std::vector<std::string>{"ok"});
    ASSERT_EQ(s.families[0].filtered.size(), 1u);
    EXPECT_NE(s.families[0].filtered[0].reason.find(tc.words), std::string::npos)
        << s.families[0].filtered[0].reason;
    // Only the filtered pool named: every pool filtered out is the error.
    pod.annotations[annotation::kIpPool] = R"({"ipv4": ["f"]})";
    s = select_pools(c, pod, {});
    ASSERT_TRUE(s.error);
    EXPECT_EQ(s.error->code, Code::kNoPoolAvailable);
    EXPECT_NE(
        s.error->msg.find("all IPv4 IPPools [f] of eth0 filtered out: [" + std::string(tc.words)),
        std::string::npos)
        << s.error->msg;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PoolFilters,
    testing::Values(
        FilterCase{"disabled", "  disable: true\n", "disabled IPPool f"},
        FilterCase{"nodeName", "  nodeName: [node-b]\n", "unmatched Node name of IPPool f"},
        FilterCase{"nodeNameOverNodeAffinity",
                   "  nodeName: [node-b]\n  nodeAffinity: {matchLabels: {zone: east}}\n",
                   "unmatched Node name of IPPool f"},
        FilterCase{"nodeAffinity", "  nodeAffinity: {matchLabels: {zone: west}}\n",
                   "unmatched Node affinity of IPPool f"},
        FilterCase{
            "nodeAffinityNotIn",
            "  nodeAffinity: {matchExpressions: [{key: zone, operator: NotIn, values: [east]}]}\n",
            "unmatched Node affinity of IPPool f"},
        FilterCase{"namespaceName", "  namespaceName: [kube-system]\n",
                   "unmatched Namespace name of IPPool f"},
        FilterCase{
            "namespaceAffinity",
            "  namespaceAffinity: {matchExpressions: [{key: team, operator: In, values: [red]}]}\n",
            "unmatched Namespace affinity of IPPool f"},
        FilterCase{"podAffinity",
                   "  podAffinity: {matchExpressions: [{key: app, operator: DoesNotExist}]}\n",
                   "unmatched Pod affinity of IPPool f"},
        FilterCase{"multusName", "  multusName: [macvlan-a]\n",
                   "cluster-network multus isn't set"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(PoolFilters, APoolWhoseEveryAddressIsExcludedIsFiltered) {
    auto c = catalog_of(pool("f", "  excludeIPs: [10.251.0.1-10.251.0.99]\n", "10.251.0.0/24",
                             "10.251.0.10-10.251.0.20") +
                        pool("ok"));
    PodFacts pod = pod_in();
    pod.annotations[annotation::kIpPool] = R"({"ipv4": ["f", "ok"]})";
    auto s = select_pools(c, pod, {});
    ASSERT_FALSE(s.error) << s.error->msg;
    EXPECT_EQ(order_of(s, Family::kV4), std::vector<std::string>{"ok"});
    ASSERT_EQ(s.families[0].filtered.size(), 1u);
    EXPECT_EQ(s.families[0].filtered[0].reason,
              "all IP addresses of IPPool f are excluded (excludeIPs)");
}

TEST(PoolFilters, APoolWithoutIpsIsFilteredAndSaysSo) {
    auto c = catalog_of(
        "---\napiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
        "metadata: {name: empty}\nspec: {subnet: 10.252.0.0/24}\n" +
        pool("ok"));
    PodFacts pod = pod_in();
    pod.annotations[annotation::kIpPool] = R"({"ipv4": ["empty", "ok"]})";
    auto s = select_pools(c, pod, {});
    ASSERT_FALSE(s.error) << s.error->msg;
    ASSERT_EQ(s.families[0].filtered.size(), 1u);
    EXPECT_EQ(s.families[0].filtered[0].reason,
              "IPPool empty has no IP addresses (spec.ips is empty)");
}

TEST(PoolFilters, APoolWhoseEveryAddressIsReservedIsFiltered) {
    auto c = catalog_of(pool("f", "", "10.250.0.0/24", "10.250.0.10-10.250.0.20") + pool("ok") +
                        "---\napiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderReservedIP\n"
                        "metadata: {name: r}\nspec: {ips: [10.250.0.5-10.250.0.30]}\n");
    PodFacts pod = pod_in();
    pod.annotations[annotation::kIpPool] = R"({"ipv4": ["f", "ok"]})";
    auto s = select_pools(c, pod, {});
    ASSERT_FALSE(s.error) << s.error->msg;
    EXPECT_EQ(order_of(s, Family::kV4), std::vector<std::string>{"ok"});
    ASSERT_EQ(s.families[0].filtered.size(), 1u);
    EXPECT_EQ(s.families[0].filtered[0].reason,
              "all IP addresses of IPPool f are reserved (SpiderReservedIP)");
}

TEST(PoolFilters, TerminatingAndWrongVersionPoolsAreFilteredFirst) {
    auto c = catalog_of(
        "---\napiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
        "metadata: {name: going, deletionTimestamp: \"2026-01-01T00:00:00Z\"}\n"
        "spec: {subnet: 10.77.0.0/24, ips: [10.77.0.5], disable: true}\n" +
        pool("six", "", "fd00:7::/64") + pool("ok"));
    PodFacts pod = pod_in();
    pod.annotations[annotation::kIpPool] = R"({"ipv4": ["going", "six", "ok"]})";
    auto s = select_pools(c, pod, {});
    ASSERT_FALSE(s.error) << s.error->msg;
    ASSERT_EQ(s.families[0].filtered.size(), 2u);
    EXPECT_EQ(s.families[0].filtered[0].reason, "terminating IPPool going");
    EXPECT_EQ(s.families[0].filtered[1].reason,
              "expect an IPv4 IPPool, but the version of the IPPool six is IPv6");
}

TEST(PoolFilters, MultusNameMatchesTheInterfacesNetwork) {
    auto c = catalog_of(pool("m-default", "  multusName: [calico]\n") +
                        pool("m-net1", "  multusName: [team/macvlan]\n") +
                        pool("m-bare", "  multusName: [macvlan]\n"));
    PoolConfig cfg;
    cfg.multus_cluster_network = "calico";  // kube-system/calico
    PodFacts pod = pod_in("team");
    pod.annotations[annotation::kIpPool] = R"({"ipv4": ["m-default", "m-net1", "m-bare"]})";
    auto s = select_pools(c, pod, cfg);
    ASSERT_FALSE(s.error) << s.error->msg;
    EXPECT_EQ(order_of(s, Family::kV4), std::vector<std::string>{"m-default"});
    // The second interface, attached by the networks annotation in text form without a
    // namespace: the pod's namespace.
    pod.ifname = "net1";
    pod.annotations[annotation::kMultusNetworks] = "macvlan";
    s = select_pools(c, pod, cfg);
    ASSERT_FALSE(s.error) << s.error->msg;
    EXPECT_EQ(order_of(s, Family::kV4), std::vector<std::string>{"m-net1"});
    // The JSON form with an explicit namespace and interface.
    pod.ifname = "vlan7";
    pod.annotations[annotation::kMultusNetworks] =
        R"([{"name": "macvlan", "namespace": "kube-system", "interface": "vlan7"}])";
    s = select_pools(c, pod, cfg);
    ASSERT_FALSE(s.error) << s.error->msg;
    EXPECT_EQ(order_of(s, Family::kV4), std::vector<std::string>{"m-bare"});
    // The pod's default-network annotation wins over the config's cluster network.
    pod.ifname = "eth0";
    pod.annotations[annotation::kMultusDefaultNetwork] = "kube-system/macvlan";
    s = select_pools(c, pod, cfg);
    EXPECT_EQ(order_of(s, Family::kV4), std::vector<std::string>{"m-bare"});
}

// ---- the sort --------------------------------------------------------------------------------

TEST(PoolSort, EachAffinityKeyOutranksTheNextAndTiesKeepTheListOrder) {
    auto c = catalog_of(
        "---\napiVersion: v1\nkind: Node\nmetadata: {name: node-a, labels: {zone: east}}\n"
        "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: default}\n" +
        pool("plain-2") + pool("multus", "  multusName: [calico]\n") +
        pool("ns-aff", "  namespaceAffinity: {}\n") +
        pool("ns-name", "  namespaceName: [default]\n") +
        pool("node-aff", "  nodeAffinity: {matchLabels: {zone: east}}\n") +
        pool("node-name", "  nodeName: [node-a]\n") + pool("pod-aff", "  podAffinity: {}\n") +
        pool("plain-1"));
    PoolConfig cfg;
    cfg.multus_cluster_network = "calico";
    PodFacts pod = pod_in();
    pod.annotations[annotation::kIpPool] =
        R"({"ipv4": ["plain-2", "multus", "ns-aff", "ns-name", "node-aff", "node-name", "pod-aff", "plain-1"]})";
    auto s = select_pools(c, pod, cfg);
    ASSERT_FALSE(s.error) << s.error->msg;
    EXPECT_EQ(order_of(s, Family::kV4),
              (std::vector<std::string>{"pod-aff", "node-name", "node-aff", "ns-name", "ns-aff",
                                        "multus", "plain-2", "plain-1"}));
}

TEST(PoolSort, SpiderpoolsThreeExamples) {
    auto c = catalog_of(
        "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: default}\n" +
        pool("a1", "  podAffinity: {}\n  nodeName: [node-a]\n") +
        pool("b1", "  podAffinity: {}\n") + pool("a2", "  podAffinity: {}\n") +
        pool("b2", "  nodeName: [node-a]\n  namespaceName: [default]\n") +
        pool("a3", "  podAffinity: {}\n  nodeName: [node-a]\n") +
        pool("b3", "  podAffinity: {}\n  namespaceName: [default]\n  multusName: [calico]\n"));
    PoolConfig cfg;
    cfg.multus_cluster_network = "calico";
    for (auto [a, b] : {std::pair{"a1", "b1"}, {"a2", "b2"}, {"a3", "b3"}}) {
        PodFacts pod = pod_in();
        pod.annotations[annotation::kIpPool] =
            std::string(R"({"ipv4": [")") + b + R"(", ")" + a + R"("]})";
        auto s = select_pools(c, pod, cfg);
        ASSERT_FALSE(s.error) << s.error->msg;
        EXPECT_EQ(order_of(s, Family::kV4), (std::vector<std::string>{a, b}));
    }
}

// ---- the allocatable set, the catalog --------------------------------------------------------

TEST(PoolAddresses, AllocatableIsIpsLessExcludedReservedAndTheGateway) {
    auto c = catalog_of(pool("p", "  gateway: 10.99.0.1\n  excludeIPs: [10.99.0.5-10.99.0.6]\n",
                             "10.99.0.0/24", "10.99.0.0-10.99.0.10") +
                        "---\napiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderReservedIP\n"
                        "metadata: {name: r}\nspec: {ipVersion: 4, ips: [10.99.0.9]}\n");
    ASSERT_NE(c.pool("p"), nullptr) << (c.problems().empty() ? "" : c.problems()[0].message);
    EXPECT_EQ(allocatable(*c.pool("p"), c).to_string(),
              "10.99.0.2-10.99.0.4,10.99.0.7-10.99.0.8,10.99.0.10");
}

TEST(PoolAddresses, ASubnetAnnotationAllocatesOutsideEveryPoolCarvedFromIt) {
    auto c = catalog_of(pool("carved", "", "10.98.0.0/16", "10.98.0.10-10.98.0.19") +
                        "---\napiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderSubnet\n"
                        "metadata: {name: s}\nspec: {subnet: 10.98.0.0/16, gateway: 10.98.0.1, "
                        "ips: [10.98.0.1-10.98.0.20]}\n");
    ASSERT_NE(c.subnet("s"), nullptr);
    EXPECT_EQ(allocatable(*c.subnet("s"), c).to_string(), "10.98.0.2-10.98.0.9,10.98.0.20");
}

TEST(PoolCatalog, OverlappingPoolsAreBothWithdrawnAndNamedTheOthersServe) {
    Catalog c;
    load_text(c, "a.yaml", pool("left", "", "10.60.0.0/24", "10.60.0.1-10.60.0.50"));
    load_text(c, "b.yaml",
              pool("right", "", "10.60.0.0/24", "10.60.0.50-10.60.0.90") + pool("fine"));
    c.finish();
    EXPECT_EQ(c.pool("left"), nullptr);
    EXPECT_EQ(c.pool("right"), nullptr);
    EXPECT_NE(c.pool("fine"), nullptr);
    ASSERT_EQ(c.problems().size(), 1u);
    const std::string& m = c.problems()[0].message;
    EXPECT_NE(m.find("left (a.yaml)"), std::string::npos) << m;
    EXPECT_NE(m.find("right (b.yaml)"), std::string::npos) << m;
    EXPECT_NE(m.find("10.60.0.50"), std::string::npos) << m;
}

TEST(PoolCatalog, ListsMultipleDocumentsJsonAndUnknownFieldsAreRead) {
    Catalog c;
    load_text(c, "list.yaml",
              "apiVersion: v1\nkind: List\nitems:\n"
              "- apiVersion: spiderpool.spidernet.io/v2beta1\n  kind: SpiderIPPool\n"
              "  metadata: {name: l1, uid: abc, resourceVersion: \"7\"}\n"
              "  spec: {subnet: 10.61.0.0/24, ips: [10.61.0.2], vlan: 0, somethingNew: {x: 1}}\n"
              "  status: {allocatedIPCount: 1}\n"
              "- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: ignored}\n");
    load_text(c, "one.json",
              R"({"apiVersion":"spiderpool.spidernet.io/v2beta1","kind":"SpiderIPPool",)"
              R"("metadata":{"name":"j1"},"spec":{"subnet":"fd00:61::/64","ips":["fd00:61::2"]}})");
    load_text(c, "bad.yaml", "kind: [unclosed\n");
    c.finish();
    ASSERT_NE(c.pool("l1"), nullptr);
    ASSERT_NE(c.pool("j1"), nullptr);
    EXPECT_EQ(c.pool("j1")->family, Family::kV6);
    ASSERT_EQ(c.problems().size(), 1u);
    EXPECT_EQ(c.problems()[0].file, "bad.yaml");
}

struct BadPool {
    const char* name;
    const char* spec;
    const char* words;
};

class PoolObjectErrors : public testing::TestWithParam<BadPool> {};

TEST_P(PoolObjectErrors, NameTheFileThePoolAndWhatToFix) {
    Catalog c;
    load_text(c, "bad.yaml",
              std::string("apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
                          "metadata: {name: broken}\nspec:\n") +
                  GetParam().spec);
    load_text(c, "good.yaml", pool("good"));
    c.finish();
    EXPECT_EQ(c.pool("broken"), nullptr);
    EXPECT_NE(c.pool("good"), nullptr);
    ASSERT_EQ(c.problems().size(), 1u);
    const std::string& m = c.problems()[0].message;
    EXPECT_NE(m.find("bad.yaml"), std::string::npos) << m;
    EXPECT_NE(m.find("SpiderIPPool broken"), std::string::npos) << m;
    EXPECT_NE(m.find(GetParam().words), std::string::npos) << m;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PoolObjectErrors,
    testing::Values(
        BadPool{"noSubnet", "  ips: [10.0.0.1]\n", "spec.subnet is required"},
        BadPool{"badCidr", "  subnet: 10.0.0.0/33\n", "is not a CIDR"},
        BadPool{"hostBits", "  subnet: 10.0.0.1/24\n", "has host bits set"},
        BadPool{"ipOutside", "  subnet: 10.0.0.0/24\n  ips: [10.0.1.1]\n", "not within subnet"},
        BadPool{"badRange", "  subnet: 10.0.0.0/24\n  ips: [10.0.0.9-10.0.0.1]\n",
                "first address is above the last"},
        BadPool{"wrongFamily", "  subnet: 10.0.0.0/24\n  ips: [\"fd00::1\"]\n",
                "is not an IPv4 address"},
        BadPool{"versionMismatch", "  subnet: 10.0.0.0/24\n  ipVersion: 6\n",
                "does not match spec.subnet"},
        BadPool{"badBool", "  subnet: 10.0.0.0/24\n  disable: maybe\n",
                "spec.disable must be true or false"},
        BadPool{
            "badSelector",
            "  subnet: 10.0.0.0/24\n  podAffinity: {matchExpressions: [{key: a, operator: In}]}\n",
            "values set can't be empty"},
        BadPool{"badOperator",
                "  subnet: 10.0.0.0/24\n  podAffinity: {matchExpressions: [{key: a, operator: "
                "Near}]}\n",
                "not a valid label selector operator"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(LabelSelectors, FollowKubernetesSemantics) {
    const Labels l{{"zone", "east"}, {"tier", "web"}};
    auto sel = [](const char* yaml_json) {
        return *decode_selector(nlohmann::json::parse(yaml_json), "t");
    };
    EXPECT_TRUE(matches(sel("{}"), l));
    EXPECT_TRUE(matches(sel(R"({"matchLabels": {"zone": "east"}})"), l));
    EXPECT_FALSE(matches(sel(R"({"matchLabels": {"zone": "west"}})"), l));
    EXPECT_TRUE(matches(
        sel(R"({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["db", "web"]}]})"),
        l));
    EXPECT_FALSE(matches(
        sel(R"({"matchExpressions": [{"key": "absent", "operator": "In", "values": ["x"]}]})"), l));
    EXPECT_TRUE(matches(
        sel(R"({"matchExpressions": [{"key": "absent", "operator": "NotIn", "values": ["x"]}]})"),
        l));
    EXPECT_FALSE(matches(
        sel(R"({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["east"]}]})"),
        l));
    EXPECT_TRUE(
        matches(sel(R"({"matchExpressions": [{"key": "zone", "operator": "Exists"}]})"), l));
    EXPECT_FALSE(
        matches(sel(R"({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]})"), l));
    // Every requirement must hold.
    EXPECT_FALSE(matches(
        sel(R"({"matchLabels": {"zone": "east"}, "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]})"),
        l));
}

TEST(IpSets, ArithmeticOverIntervals) {
    IpSet a(Family::kV4);
    ASSERT_TRUE(a.add_text("10.0.0.1-10.0.0.10"));
    ASSERT_TRUE(a.add_text("10.0.0.11"));  // adjacent: merged
    ASSERT_TRUE(a.add_text("10.0.0.20-10.0.0.30"));
    EXPECT_EQ(a.to_string(), "10.0.0.1-10.0.0.11,10.0.0.20-10.0.0.30");
    EXPECT_EQ(uint64_t(a.count()), 22u);
    IpSet cut(Family::kV4);
    ASSERT_TRUE(cut.add_text("10.0.0.5-10.0.0.25"));
    EXPECT_EQ(a.minus(cut).to_string(), "10.0.0.1-10.0.0.4,10.0.0.26-10.0.0.30");
    EXPECT_TRUE(a.contains(*engine::IpAddress::parse("10.0.0.11")));
    EXPECT_FALSE(a.contains(*engine::IpAddress::parse("10.0.0.15")));
    IpSet six(Family::kV6);
    ASSERT_TRUE(six.add_text("fd00::10-fd00::1f"));
    EXPECT_EQ(uint64_t(six.count()), 16u);
    EXPECT_FALSE(six.add_text("10.0.0.1"));
    EXPECT_FALSE(a.add_text("10.0.0"));
}

}  // namespace
}  // namespace shmipam::pools

namespace shmipam::pools {
namespace {

TEST(PoolSnapshot, ARoundTripSelectsAsTheParsedCatalogDoesAndDecodesOnlyWhatItIsAskedFor) {
    const std::string yaml =
        "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: team, labels: {a: b}, annotations: "
        "{ipam.spidernet.io/default-ipv4-ippool: '[\"p-*\"]'}}\n"
        "---\napiVersion: v1\nkind: Node\nmetadata: {name: node-a, labels: {zone: east}}\n"
        "---\napiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderReservedIP\nmetadata: "
        "{name: r}\n"
        "spec: {ips: [10.70.0.11]}\n"
        "---\napiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderSubnet\nmetadata: {name: "
        "s}\n"
        "spec: {subnet: 10.70.0.0/16, ips: [10.70.0.1-10.70.9.9], routes: [{dst: 1.0.0.0/8, gw: "
        "10.70.0.1}]}\n"
        "---\napiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\nmetadata: {name: "
        "p-b}\n"
        "spec: {subnet: 10.70.0.0/24, ips: [10.70.0.10-10.70.0.20], gateway: 10.70.0.1, "
        "nodeAffinity: {matchExpressions: [{key: zone, operator: In, values: [east]}]}, "
        "podAffinity: {matchLabels: {app: x}}, multusName: [m]}\n"
        "---\napiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\nmetadata: {name: "
        "p-a}\n"
        "spec: {subnet: 10.70.1.0/24, ips: [10.70.1.10], excludeIPs: [10.70.1.10], default: true}\n"
        "---\napiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\nmetadata: {name: "
        "broken}\n"
        "spec: {subnet: nope}\n";
    Catalog parsed;
    load_text(parsed, "all.yaml", yaml);
    parsed.finish();
    auto bytes = std::make_shared<std::string>(encode_catalog(parsed));
    auto decoded = decode_catalog(*bytes, bytes);
    ASSERT_TRUE(decoded);
    PodFacts pod;
    pod.namespace_ = "team";
    pod.node_name = "node-a";
    pod.ifname = "eth0";
    pod.labels["app"] = "x";
    PoolConfig cfg;
    cfg.multus_cluster_network = "m";
    auto a = select_pools(parsed, pod, cfg);
    auto b = select_pools(*decoded, pod, cfg);
    ASSERT_EQ(a.families.size(), b.families.size());
    ASSERT_FALSE(a.error) << a.error->msg;
    ASSERT_FALSE(b.error) << b.error->msg;
    for (size_t i = 0; i < a.families.size(); ++i) {
        ASSERT_EQ(a.families[i].order.size(), b.families[i].order.size());
        for (size_t k = 0; k < a.families[i].order.size(); ++k) {
            EXPECT_EQ(a.families[i].order[k].name, b.families[i].order[k].name);
        }
        ASSERT_EQ(a.families[i].filtered.size(), b.families[i].filtered.size());
        for (size_t k = 0; k < a.families[i].filtered.size(); ++k) {
            EXPECT_EQ(a.families[i].filtered[k].reason, b.families[i].filtered[k].reason);
        }
    }
    EXPECT_EQ(decoded->withdrawn("broken"), parsed.withdrawn("broken"));
    EXPECT_EQ(decoded->problems().size(), parsed.problems().size());
    EXPECT_EQ(allocatable(*decoded->subnet("s"), *decoded).to_string(),
              allocatable(*parsed.subnet("s"), parsed).to_string());
    // Re-encoding the decoded catalog gives the same bytes.
    EXPECT_EQ(encode_catalog(*decoded), *bytes);
    // A damaged snapshot is refused, never half-read.
    for (size_t cut : {size_t(3), bytes->size() / 2, bytes->size() - 1}) {
        EXPECT_FALSE(decode_catalog(std::string_view(*bytes).substr(0, cut), nullptr)) << cut;
    }
    // A flipped byte in the header part is refused at once; one in a pool's bytes when that pool
    // is asked for: it is then out of service, saying why, and the others serve.
    std::string flipped = *bytes;
    flipped[30] ^= 0x40;
    EXPECT_FALSE(decode_catalog(flipped, nullptr));
    auto in_blob = std::make_shared<std::string>(*bytes);
    const size_t at = in_blob->find("p-b", in_blob->find("p-b") + 1);  // p-b's own bytes
    ASSERT_NE(at, std::string::npos);
    (*in_blob)[at + 2] ^= 0x01;
    auto damaged = decode_catalog(*in_blob, in_blob);
    ASSERT_TRUE(damaged);
    EXPECT_EQ(damaged->pool("p-b"), nullptr);
    EXPECT_NE(damaged->withdrawn("p-b").find("snapshot is damaged"), std::string::npos);
    EXPECT_NE(damaged->pool("p-a"), nullptr);
}

}  // namespace
}  // namespace shmipam::pools

namespace shmipam::pools {
namespace {

TEST(PoolCatalog, ANameDefinedTwiceWithdrawsBothCopiesAndNamesBothFiles) {
    Catalog c;
    const std::string p =
        "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderIPPool\n"
        "metadata: {name: twin}\nspec: {subnet: 10.90.0.0/24, ips: [10.90.0.5]}\n";
    const std::string s =
        "apiVersion: spiderpool.spidernet.io/v2beta1\nkind: SpiderSubnet\n"
        "metadata: {name: stwin}\nspec: {subnet: 10.91.0.0/24, ips: [10.91.0.5]}\n";
    load_text(c, "one.yaml", p + "---\n" + s);
    load_text(c, "two.yaml", p + "---\n" + s);
    c.finish();
    EXPECT_EQ(c.pool("twin"), nullptr);
    EXPECT_EQ(c.subnet("stwin"), nullptr);
    EXPECT_EQ(c.withdrawn("twin"), "SpiderIPPool twin is defined twice: in one.yaml and two.yaml");
    EXPECT_EQ(c.withdrawn("stwin"),
              "SpiderSubnet stwin is defined twice: in one.yaml and two.yaml");
}

}  // namespace
}  // namespace shmipam::pools
