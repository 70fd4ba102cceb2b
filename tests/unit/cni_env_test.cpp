#include "plugin/cni_env.h"

#include <gtest/gtest.h>

#include <map>

#include "ipam/config_fields.h"
#include "plugin/cni_args.h"
#include "plugin/resolv_conf.h"
#include "tests/support/temp_dir.h"

namespace shmipam::cni {
namespace {

EnvLookup env_of(std::map<std::string, std::string> m) {
    return [m](const char* k) -> std::optional<std::string> {
        auto it = m.find(k);
        if (it == m.end()) return std::nullopt;
        return it->second;
    };
}

std::map<std::string, std::string> full(const std::string& cmd) {
    return {{"CNI_COMMAND", cmd},
            {"CNI_CONTAINERID", "abc"},
            {"CNI_NETNS", "/n"},
            {"CNI_IFNAME", "eth0"},
            {"CNI_PATH", "/p"}};
}

TEST(CniEnv, ReadsEveryCommand) {
    for (const char* c : {"ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION"}) {
        EXPECT_TRUE(read_env(env_of(full(c)))) << c;
    }
    auto bad = read_env(env_of(full("FROB")));
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().code, Code::kInvalidEnv);
}

TEST(CniEnv, MissingVariablesAreNamed) {
    auto m = full("ADD");
    m.erase("CNI_NETNS");
    m.erase("CNI_PATH");
    auto e = read_env(env_of(m));
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().code, Code::kInvalidEnv);
    EXPECT_NE(e.error().msg.find("CNI_NETNS,CNI_PATH"), std::string::npos) << e.error().msg;
    // DEL does not need a netns (the namespace may be gone already).
    auto d = full("DEL");
    d.erase("CNI_NETNS");
    EXPECT_TRUE(read_env(env_of(d)));
    EXPECT_EQ(read_env(env_of({})).error().code, Code::kInvalidEnv);
}

TEST(CniEnv, ValidatesLikeSkel) {
    EXPECT_TRUE(validate_container_id("a1_b.c-d"));
    EXPECT_EQ(validate_container_id("").error().code, Code::kUnknownContainer);
    EXPECT_EQ(validate_container_id("-abc").error().code, Code::kInvalidEnv);
    EXPECT_EQ(validate_container_id("a/b").error().code, Code::kInvalidEnv);
    EXPECT_TRUE(validate_ifname("eth0"));
    EXPECT_TRUE(validate_ifname("a23456789012345"));
    EXPECT_FALSE(validate_ifname("a234567890123456"));
    for (const char* bad : {"", ".", "..", "a/b", "a:b", "a b", "a\tb"}) {
        EXPECT_EQ(validate_ifname(bad).error().code, Code::kInvalidEnv) << bad;
    }
    EXPECT_TRUE(ipam::config_fields::validate_network_name("k8s-pod-network"));
    for (const char* bad : {"", "..", ".hidden", "a/b", "a b"}) {
        EXPECT_EQ(ipam::config_fields::validate_network_name(bad).error().code,
                  Code::kInvalidConfig)
            << bad;
    }
}

TEST(CniArgs, ParsesKubernetesArgs) {
    auto a = parse_cni_args(
        "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;"
        "K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=u1;FOO=bar;IP=10.1.0.5,fd00::5");
    ASSERT_TRUE(a) << a.error().msg;
    EXPECT_EQ(a->pod_namespace, "default");
    EXPECT_EQ(a->pod_name, "web-0");
    EXPECT_EQ(a->ips, (std::vector<std::string>{"10.1.0.5", "fd00::5"}));
}

TEST(CniArgs, UnknownKeysNeedIgnoreUnknown) {
    auto a = parse_cni_args("FOO=bar");
    ASSERT_FALSE(a);
    EXPECT_EQ(a.error().code, Code::kInvalidEnv);
    EXPECT_TRUE(parse_cni_args("FOO=bar;IgnoreUnknown=true"));
    EXPECT_FALSE(parse_cni_args("IgnoreUnknown=0;FOO=bar"));
    EXPECT_FALSE(parse_cni_args("novalue"));
    EXPECT_TRUE(parse_cni_args(""));
}

TEST(ResolvConf, ParsesNameserversSearchOptions) {
    testing::TempDir dir;
    testing::write_file(dir.sub("resolv.conf"),
                        "# comment\nnameserver 10.0.0.10\nnameserver 10.0.0.11\n"
                        "domain cluster.local\nsearch a.svc b.svc\noptions ndots:5\n");
    auto dns = read_resolv_conf(dir.sub("resolv.conf"));
    ASSERT_TRUE(dns);
    EXPECT_EQ((*dns)["nameservers"].size(), 2u);
    EXPECT_EQ((*dns)["domain"], "cluster.local");
    EXPECT_EQ((*dns)["search"][1], "b.svc");
    EXPECT_EQ((*dns)["options"][0], "ndots:5");
    EXPECT_EQ(read_resolv_conf(dir.sub("missing")).error().code, Code::kInvalidConfig);
}

}  // namespace
}  // namespace shmipam::cni
