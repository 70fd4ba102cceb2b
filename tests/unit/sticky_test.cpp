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
    auto id = sticky_identity(c.pod, StickyRules{c.config_fixed_ip});
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
    auto id =
        sticky_identity(with_annotation(plain_pod(), kStaticIpAnnotation, "true"), StickyRules{});
    ASSERT_FALSE(id);
    EXPECT_NE(id.error().msg.find("shop/web-7f9c-x2"), std::string::npos) << id.error().msg;
    EXPECT_NE(id.error().msg.find("not a StatefulSet pod"), std::string::npos) << id.error().msg;
    EXPECT_NE(id.error().msg.find(kStaticIpAnnotation), std::string::npos) << id.error().msg;
}

TEST(StickyIdentity, EachInterfaceIsItsOwnClaim) {
    PodFacts a = sts_pod(), b = sts_pod();
    b.ifname = "net1";
    EXPECT_NE((*sticky_identity(a, StickyRules{true}))->key(),
              (*sticky_identity(b, StickyRules{true}))->key());
    EXPECT_EQ((*sticky_identity(a, StickyRules{true}))->display(), "shop/db-0");
}

TEST(StickyIdentity, AStickyPodWithoutANamespaceIsAnError) {
    PodFacts p = sts_pod();
    p.namespace_.clear();
    auto id = sticky_identity(p, StickyRules{true});
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
    EXPECT_EQ(describe(ClaimPolicy{K::kWhileOwnerWants, 0}), "while its StatefulSet wants it");
    EXPECT_EQ(describe(ClaimPolicy{K::kWhileOwnerWants, 0}, StickyKind::kKubeVirt),
              "while its VM exists");
}

// A pod as the API server gives it (docs/kubernetes.md): its controller and its own labels.
PodFacts api_pod(const std::string& name, std::optional<Controller> controller) {
    PodFacts p;
    p.namespace_ = "shop";
    p.name = name;
    p.ifname = "eth0";
    p.from_api = true;
    p.controller = std::move(controller);
    return p;
}

Controller statefulset(const std::string& name) {
    return Controller{"apps/v1", "StatefulSet", name};
}

TEST(StickyFromApi, AStatefulSetPodKeepsItsAddressByDefaultWithTheOwnerPolicy) {
    const PodFacts pod = api_pod("db-3", statefulset("db"));
    auto id = sticky_identity(pod, StickyRules{false, true});
    ASSERT_TRUE(id && *id);
    EXPECT_EQ((*id)->key(), "sts:shop/db-3/eth0");
    EXPECT_TRUE((*id)->by_default);
    auto policy = claim_policy(pod, (*id)->by_default);
    ASSERT_TRUE(policy);
    EXPECT_EQ(policy->kind, ClaimPolicy::Kind::kWhileOwnerWants);
    EXPECT_EQ(describe(*policy), "while its StatefulSet wants it");
    // A policy annotation keeps its meaning under the default.
    auto hours = claim_policy(with_annotation(pod, kClaimPolicyAnnotation, "2"), true);
    ASSERT_TRUE(hours);
    EXPECT_EQ(*hours, (ClaimPolicy{ClaimPolicy::Kind::kAfterIdle, 7200}));
}

TEST(StickyFromApi, TheDefaultOffOrAnOptOutLeavesTheStatefulSetPodOrdinary) {
    const PodFacts pod = api_pod("db-3", statefulset("db"));
    auto off = sticky_identity(pod, StickyRules{false, false});
    ASSERT_TRUE(off);
    EXPECT_FALSE(*off);
    auto opted_out = sticky_identity(with_annotation(pod, kStaticIpAnnotation, "false"),
                                     StickyRules{false, true});
    ASSERT_TRUE(opted_out);
    EXPECT_FALSE(*opted_out);
    // The explicit ask keeps "never" as its policy.
    auto asked = sticky_identity(with_annotation(pod, kStaticIpAnnotation, "true"),
                                 StickyRules{false, true});
    ASSERT_TRUE(asked && *asked);
    EXPECT_FALSE((*asked)->by_default);
}

TEST(StickyFromApi, ADeploymentPodAskingForAStaticIpIsRefusedNamingItsController) {
    PodFacts pod = api_pod("web-5d4f7-x2x7z", Controller{"apps/v1", "ReplicaSet", "web-5d4f7"});
    // The label a runtime could pass is not trusted over the API's controller.
    pod.labels[kStatefulSetPodNameLabel] = pod.name;
    auto id = sticky_identity(with_annotation(pod, kStaticIpAnnotation, "true"), StickyRules{});
    ASSERT_FALSE(id);
    EXPECT_EQ(id.error().code, Code::kPoolAnnotationInvalid);
    EXPECT_NE(id.error().msg.find("ReplicaSet web-5d4f7"), std::string::npos) << id.error().msg;
    // The default never applies to it.
    auto unasked = sticky_identity(pod, StickyRules{false, true});
    ASSERT_TRUE(unasked);
    EXPECT_FALSE(*unasked);
}

TEST(StickyFromApi, AStatefulSetOwnerWhoseNameIsNotThePodsPrefixIsNotTrusted) {
    auto id = sticky_identity(api_pod("other-0", statefulset("db")), StickyRules{false, true});
    ASSERT_TRUE(id);
    EXPECT_FALSE(*id);
}

TEST(StickyFromApi, AKubeVirtLauncherPodIsKnownByItsVmiOwner) {
    const PodFacts pod = api_pod("virt-launcher-vm1-abcde",
                                 Controller{"kubevirt.io/v1", "VirtualMachineInstance", "vm1"});
    auto id = sticky_identity(with_annotation(pod, kStaticIpAnnotation, "true"), StickyRules{});
    ASSERT_TRUE(id && *id);
    EXPECT_EQ((*id)->key(), "vm:shop/vm1/eth0");
    // Not under the StatefulSet default.
    auto unasked = sticky_identity(pod, StickyRules{false, true});
    ASSERT_TRUE(unasked);
    EXPECT_FALSE(*unasked);
}

// A VM's claim is kept while the VM exists when nothing says otherwise, wherever the API server
// can be asked; without it, "never" as before (nothing could ever free it by its owner).
TEST(StickyFromApi, AVmsClaimIsKeptWhileItsVmExistsByDefault) {
    const PodFacts pod =
        with_annotation(api_pod("virt-launcher-vm1-abcde",
                                Controller{"kubevirt.io/v1", "VirtualMachineInstance", "vm1"}),
                        kStaticIpAnnotation, "true");
    auto id = sticky_identity(pod, StickyRules{});
    ASSERT_TRUE(id && *id);
    EXPECT_TRUE(owner_default_applies(**id, /*api=*/true));
    EXPECT_FALSE(owner_default_applies(**id, /*api=*/false));
    auto policy = claim_policy(pod, owner_default_applies(**id, true));
    ASSERT_TRUE(policy);
    EXPECT_EQ(policy->kind, K::kWhileOwnerWants);
    // The policy annotation still wins.
    auto timed = claim_policy(with_annotation(pod, kClaimPolicyAnnotation, "2"), true);
    ASSERT_TRUE(timed);
    EXPECT_EQ(*timed, (ClaimPolicy{K::kAfterIdle, 7200}));
    // A StatefulSet pod asking by annotation keeps "never" unless the default keeps it.
    auto sts = sticky_identity(
        with_annotation(api_pod("db-0", statefulset("db")), kStaticIpAnnotation, "true"),
        StickyRules{});
    ASSERT_TRUE(sts && *sts);
    EXPECT_FALSE(owner_default_applies(**sts, true));
}

TEST(LauncherVmName, ReadsKubeVirtsNamingAndNothingElse) {
    EXPECT_EQ(launcher_vm_name("virt-launcher-vm1-abcde"), "vm1");
    EXPECT_EQ(launcher_vm_name("virt-launcher-my-db-vm-x7k2p"), "my-db-vm");
    EXPECT_FALSE(launcher_vm_name("virt-launcher-vm1"));
    EXPECT_FALSE(launcher_vm_name("virt-launcher--abcde"));
    EXPECT_FALSE(launcher_vm_name("web-0"));
    EXPECT_FALSE(launcher_vm_name("virt-launcher-vm1_abcde"));
}

TEST(StatefulSetMember, ReadsTheControllersNamingAndNothingElse) {
    auto m = statefulset_member("web-12");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->set, "web");
    EXPECT_EQ(m->ordinal, 12);
    EXPECT_EQ(statefulset_member("my-db-0")->set, "my-db");
    for (const char* not_one :
         {"web", "web-", "-1", "web-01", "web-x1", "web-5d4f7-x2x7z", "web-12345678901"}) {
        EXPECT_FALSE(statefulset_member(not_one)) << not_one;
    }
}

TEST(StatefulSetMember, TheSetWantsTheOrdinalsItsReplicasCover) {
    const SetState three{true, false, 0, 3};
    EXPECT_TRUE(statefulset_wants(three, 2));
    EXPECT_FALSE(statefulset_wants(three, 3));
    const SetState from_five{true, false, 5, 2};
    EXPECT_FALSE(statefulset_wants(from_five, 4));
    EXPECT_TRUE(statefulset_wants(from_five, 6));
    EXPECT_FALSE(statefulset_wants(from_five, 7));
    EXPECT_FALSE(statefulset_wants(SetState{true, true, 0, 3}, 0));    // being deleted
    EXPECT_FALSE(statefulset_wants(SetState{false, false, 0, 3}, 0));  // gone
}

TEST(StickyIdentity, AKeyReadsBackAsItsIdentity) {
    auto id = identity_of_key("sts:shop/db-0/net1");
    ASSERT_TRUE(id);
    EXPECT_EQ(id->kind, StickyKind::kStatefulSet);
    EXPECT_EQ(id->namespace_, "shop");
    EXPECT_EQ(id->name, "db-0");
    EXPECT_EQ(id->ifname, "net1");
    EXPECT_EQ(identity_of_key("vm:shop/vm1/eth0")->kind, StickyKind::kKubeVirt);
    for (const char* bad :
         {"", "sts:", "sts:shop/db-0", "pod:shop/db-0/eth0", "sts:a/b/c/d", "sts:/db-0/eth0"}) {
        EXPECT_FALSE(identity_of_key(bad)) << bad;
    }
}

}  // namespace
}  // namespace shmipam::pools
