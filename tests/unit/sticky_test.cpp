// Who keeps an address by name, and for how long an idle claim is kept: the rules of the
// fixed-IP design document (StatefulSet pods, KubeVirt VMs, the opt-in and its alias, the
// error for a pod that asks but cannot keep a name) and every form of the claim policy.
#include "pools/sticky.h"

#include <gtest/gtest.h>

namespace shmipam::pools {
namespace {

PodFacts sts_pod(const std::string& name = "db-0") {
    PodFacts p;
    p.namespace_ = "shop";
    p.name = name;
    p.ifname = "eth0";
    p.labels[kStatefulSetPodNameLabel] = name;
    p.labels["app"] = "db";
    return p;
}

PodFacts plain_pod() {
    PodFacts p;
    p.namespace_ = "shop";
    p.name = "web-7f9c-x2";
    p.ifname = "eth0";
    p.labels["app"] = "web";
    return p;
}

struct StickyCase {
    std::string name;
    PodFacts pod;
    bool config_fixed_ip;
    std::optional<std::string> key;  // nullopt: an ordinary pod
    std::optional<Code> error;
};

void PrintTo(const StickyCase& c, std::ostream* os) {
    *os << c.name;
}

PodFacts with_annotation(PodFacts p, const std::string& k, const std::string& v) {
    p.annotations[k] = v;
    return p;
}

class StickyIdentityRules : public ::testing::TestWithParam<StickyCase> {};

TEST_P(StickyIdentityRules, DecidesWhoKeepsAnAddressByName) {
    const StickyCase& c = GetParam();
    auto id = sticky_identity(c.pod, c.config_fixed_ip);
    if (c.error) {
        ASSERT_FALSE(id) << "expected an error";
        EXPECT_EQ(id.error().code, *c.error);
        return;
    }
    ASSERT_TRUE(id) << id.error().msg;
    if (!c.key) {
        EXPECT_FALSE(id->has_value()) << (*id)->key();
    } else {
        ASSERT_TRUE(id->has_value());
        EXPECT_EQ((*id)->key(), *c.key);
    }
}

PodFacts vm_pod() {
    PodFacts p = plain_pod();
    p.name = "virt-launcher-vm1-abcde";
    p.labels[kKubeVirtVmLabel] = "vm1";
    return p;
}

PodFacts mislabelled_sts_pod() {
    PodFacts p = sts_pod("db-1");
    p.labels[kStatefulSetPodNameLabel] = "db-0";  // a label copied from another pod
    return p;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, StickyIdentityRules,
    ::testing::Values(StickyCase{"StatefulSetPodWithoutAnyOptInIsOrdinary", sts_pod(), false,
                                 std::nullopt, std::nullopt},
                      StickyCase{"ConfigSwitchMakesAStatefulSetPodSticky", sts_pod(), true,
                                 "sts:shop/db-0/eth0", std::nullopt},
                      StickyCase{"AnnotationMakesAStatefulSetPodSticky",
                                 with_annotation(sts_pod(), kStaticIpAnnotation, "true"), false,
                                 "sts:shop/db-0/eth0", std::nullopt},
                      StickyCase{"TheDesignDocumentsAnnotationIsAnAlias",
                                 with_annotation(sts_pod(), kStaticIpAlias, "true"), false,
                                 "sts:shop/db-0/eth0", std::nullopt},
                      StickyCase{"ShmipamsAnnotationWinsOverTheAlias",
                                 with_annotation(with_annotation(sts_pod(), kStaticIpAlias, "true"),
                                                 kStaticIpAnnotation, "false"),
                                 false, std::nullopt, std::nullopt},
                      StickyCase{"AnnotationFalseOptsOutOfTheConfigSwitch",
                                 with_annotation(sts_pod(), kStaticIpAnnotation, "false"), true,
                                 std::nullopt, std::nullopt},
                      StickyCase{"ConfigSwitchLeavesOtherPodsOrdinary", plain_pod(), true,
                                 std::nullopt, std::nullopt},
                      StickyCase{"APodThatAsksButIsNotAStatefulSetPodIsRefused",
                                 with_annotation(plain_pod(), kStaticIpAnnotation, "true"), false,
                                 std::nullopt, Code::kPoolAnnotationInvalid},
                      StickyCase{
                          "APodWhoseStatefulSetLabelNamesAnotherPodIsRefused",
                          with_annotation(mislabelled_sts_pod(), kStaticIpAnnotation, "true"),
                          false, std::nullopt, Code::kPoolAnnotationInvalid},
                      StickyCase{"AKubeVirtLauncherPodIsStickyByItsVmName",
                                 with_annotation(vm_pod(), kStaticIpAnnotation, "true"), false,
                                 "vm:shop/vm1/eth0", std::nullopt},
                      StickyCase{"AKubeVirtLauncherPodUnderTheConfigSwitch", vm_pod(), true,
                                 "vm:shop/vm1/eth0", std::nullopt},
                      StickyCase{"ABooleanIsReadAsGoReadsIt",
                                 with_annotation(sts_pod(), kStaticIpAnnotation, " True "), false,
                                 "sts:shop/db-0/eth0", std::nullopt},
                      StickyCase{"ANonBooleanAnnotationIsAnError",
                                 with_annotation(sts_pod(), kStaticIpAnnotation, "yes"), false,
                                 std::nullopt, Code::kPoolAnnotationInvalid}),
    [](const auto& info) { return info.param.name; });

TEST(StickyIdentity, TheRefusalSaysWhatToFix) {
    auto id = sticky_identity(with_annotation(plain_pod(), kStaticIpAnnotation, "true"), false);
    ASSERT_FALSE(id);
    EXPECT_NE(id.error().msg.find("shop/web-7f9c-x2"), std::string::npos) << id.error().msg;
    EXPECT_NE(id.error().msg.find("not a StatefulSet pod"), std::string::npos) << id.error().msg;
    EXPECT_NE(id.error().msg.find(kStaticIpAnnotation), std::string::npos) << id.error().msg;
}

TEST(StickyIdentity, EachInterfaceIsItsOwnClaim) {
    PodFacts a = sts_pod(), b = sts_pod();
    b.ifname = "net1";
    EXPECT_NE((*sticky_identity(a, true))->key(), (*sticky_identity(b, true))->key());
    EXPECT_EQ((*sticky_identity(a, true))->display(), "shop/db-0");
}

TEST(StickyIdentity, AStickyPodWithoutANamespaceIsAnError) {
    PodFacts p = sts_pod();
    p.namespace_.clear();
    auto id = sticky_identity(p, true);
    ASSERT_FALSE(id);
    EXPECT_EQ(id.error().code, Code::kInvalidEnv);
}

struct PolicyCase {
    std::string value;
    std::optional<ClaimPolicy> want;  // nullopt: an error
};

class ClaimPolicyForms : public ::testing::TestWithParam<PolicyCase> {};

TEST_P(ClaimPolicyForms, ReadEveryFormTheDesignDocumentAndKubernetesUse) {
    const PolicyCase& c = GetParam();
    auto p = claim_policy(with_annotation(sts_pod(), kClaimPolicyAnnotation, c.value));
    if (!c.want) {
        ASSERT_FALSE(p) << "\"" << c.value << "\" should be refused, got " << describe(*p);
        EXPECT_EQ(p.error().code, Code::kPoolAnnotationInvalid);
        EXPECT_NE(p.error().msg.find(c.value), std::string::npos) << p.error().msg;
        return;
    }
    ASSERT_TRUE(p) << p.error().msg;
    EXPECT_EQ(*p, *c.want) << describe(*p);
}

using K = ClaimPolicy::Kind;
INSTANTIATE_TEST_SUITE_P(
    Values, ClaimPolicyForms,
    ::testing::Values(PolicyCase{"", ClaimPolicy{K::kNever, 0}},
                      PolicyCase{"  ", ClaimPolicy{K::kNever, 0}},
                      PolicyCase{"0", ClaimPolicy{K::kAtDelete, 0}},
                      PolicyCase{"0s", ClaimPolicy{K::kAtDelete, 0}},
                      PolicyCase{"24", ClaimPolicy{K::kAfterIdle, 24 * 3600}},
                      PolicyCase{"48h", ClaimPolicy{K::kAfterIdle, 48 * 3600}},
                      PolicyCase{"90m", ClaimPolicy{K::kAfterIdle, 90 * 60}},
                      PolicyCase{"5s", ClaimPolicy{K::kAfterIdle, 5}},
                      PolicyCase{"1h30m", ClaimPolicy{K::kAfterIdle, 5400}},
                      PolicyCase{"2h0m30s", ClaimPolicy{K::kAfterIdle, 7230}},
                      PolicyCase{"-1", std::nullopt}, PolicyCase{"1.5", std::nullopt},
                      PolicyCase{"1.5h", std::nullopt}, PolicyCase{"10ms", std::nullopt},
                      PolicyCase{"3d", std::nullopt}, PolicyCase{"h", std::nullopt},
                      PolicyCase{"12 h", std::nullopt}, PolicyCase{"forever", std::nullopt},
                      PolicyCase{"00000024", ClaimPolicy{K::kAfterIdle, 24 * 3600}},
                      PolicyCase{"876001", std::nullopt},
                      PolicyCase{"99999999999h", std::nullopt}));

TEST(ClaimPolicy, AbsentIsNeverAndTheAliasIsRead) {
    auto never = claim_policy(sts_pod());
    ASSERT_TRUE(never);
    EXPECT_EQ(never->kind, K::kNever);
    auto alias = claim_policy(with_annotation(sts_pod(), kClaimPolicyAlias, "0"));
    ASSERT_TRUE(alias);
    EXPECT_EQ(alias->kind, K::kAtDelete);
    auto both = claim_policy(with_annotation(with_annotation(sts_pod(), kClaimPolicyAlias, "0"),
                                             kClaimPolicyAnnotation, "2"));
    ASSERT_TRUE(both);
    EXPECT_EQ(*both, (ClaimPolicy{K::kAfterIdle, 7200}));
}

TEST(ClaimPolicy, DescribesItselfAsAnOperatorWritesIt) {
    EXPECT_EQ(describe(ClaimPolicy{}), "never");
    EXPECT_EQ(describe(ClaimPolicy{K::kAtDelete, 0}), "at DEL");
    EXPECT_EQ(describe(ClaimPolicy{K::kAfterIdle, 5400}), "1h30m idle");
    EXPECT_EQ(describe(ClaimPolicy{K::kAfterIdle, 5}), "5s idle");
}

}  // namespace
}  // namespace shmipam::pools
