// The plugin/Kubernetes-helper protocol (kube/pod_protocol.h): each op survives encode and decode
// whole; a request of another version or an unknown op is refused with code 1, a missing or
// mistyped field with 7 naming it, text that is not JSON with 6; an answer carrying an error is
// that error; no field of any type, in a request or an answer, makes it throw.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kube/pod_protocol.h"

namespace shmipam::kube::protocol {
namespace {

using nlohmann::json;

const Api kApi{"/etc/cni/net.d/shmipam.d/kubeconfig", 1500};

PodAnswer pod() {
    PodAnswer a;
    a.uid = "7c1e-uid";
    a.node_name = "worker-1";
    a.labels = {{"app", "web"}, {"tier", "front"}};
    a.annotations = {{"ipam.spidernet.io/ippool", "{\"ipv4\":[\"a\"]}"}};
    a.owners = {{"apps/v1", "StatefulSet", "web", "sts-uid", true},
                {"v1", "ConfigMap", "cm", "cm-uid", false}};
    return a;
}

TEST(KubeProtocol, EveryOpSurvivesEncodeAndDecodeWhole) {
    auto p = decode(encode(Request{ReadPod{kApi, "shop", "web-0"}}));
    ASSERT_TRUE(p) << p.error().msg;
    const auto& rp = std::get<ReadPod>(*p);
    EXPECT_EQ(rp.api.kubeconfig, kApi.kubeconfig);
    EXPECT_EQ(rp.api.budget_ms, 1500u);
    EXPECT_EQ(rp.namespace_, "shop");
    EXPECT_EQ(rp.name, "web-0");

    auto s = decode(encode(Request{ReadStatefulSets{kApi, {{"shop", "web"}, {"kube", "db"}}}}));
    ASSERT_TRUE(s) << s.error().msg;
    const auto& rs = std::get<ReadStatefulSets>(*s);
    ASSERT_EQ(rs.sets.size(), 2u);
    EXPECT_EQ(rs.sets[1].namespace_, "kube");
    EXPECT_EQ(rs.sets[1].name, "db");

    const json j = json::parse(encode(Request{ReadPod{kApi, "shop", "web-0"}}));
    EXPECT_EQ(j["version"], kVersion);
    EXPECT_EQ(j["op"], "read-pod");
}

TEST(KubeProtocol, TheBudgetLeftOutIsTheDefault) {
    json j = json::parse(encode(Request{ReadPod{kApi, "shop", "web-0"}}));
    j.erase("budgetMs");
    auto r = decode(j.dump());
    ASSERT_TRUE(r) << r.error().msg;
    EXPECT_EQ(std::get<ReadPod>(*r).api.budget_ms, kDefaultBudgetMs);
}

TEST(KubeProtocol, TheConnectTimeoutTravelsAndLeftOutIsTheDefault) {
    const Api api{"/etc/k", 5000, 750};
    auto r = decode(encode(Request{ReadPod{api, "shop", "web-0"}}));
    ASSERT_TRUE(r) << r.error().msg;
    EXPECT_EQ(std::get<ReadPod>(*r).api.connect_timeout_ms, 750u);
    json j = json::parse(encode(Request{ReadPod{api, "shop", "web-0"}}));
    j.erase("connectTimeoutMs");
    auto def = decode(j.dump());
    ASSERT_TRUE(def) << def.error().msg;
    EXPECT_EQ(std::get<ReadPod>(*def).api.connect_timeout_ms, kDefaultConnectTimeoutMs);
    j["connectTimeoutMs"] = 0;
    EXPECT_EQ(decode(j.dump()).error().code, Code::kInvalidConfig) << "a timeout of 0 is none";
}

TEST(KubeProtocol, AnswersSurviveToJsonAndTheirParserWhole) {
    auto back = pod_answer(to_json(pod()).dump());
    ASSERT_TRUE(back) << back.error().msg;
    EXPECT_EQ(back->uid, "7c1e-uid");
    EXPECT_EQ(back->node_name, "worker-1");
    EXPECT_EQ(back->labels, pod().labels);
    EXPECT_EQ(back->annotations, pod().annotations);
    ASSERT_EQ(back->owners.size(), 2u);
    EXPECT_EQ(back->owners[0].api_version, "apps/v1");
    EXPECT_EQ(back->owners[0].kind, "StatefulSet");
    EXPECT_EQ(back->owners[0].name, "web");
    EXPECT_EQ(back->owners[0].uid, "sts-uid");
    EXPECT_TRUE(back->owners[0].controller);
    EXPECT_FALSE(back->owners[1].controller);

    StatefulSetsAnswer sets;
    sets.sets.push_back({"shop", "web", true, true, 3, 5});
    sets.sets.push_back({"shop", "gone", false, false, 0, 1});
    auto s = statefulsets_answer(to_json(sets).dump());
    ASSERT_TRUE(s) << s.error().msg;
    ASSERT_EQ(s->sets.size(), 2u);
    EXPECT_TRUE(s->sets[0].exists);
    EXPECT_TRUE(s->sets[0].deleting);
    EXPECT_EQ(s->sets[0].ordinals_start, 3);
    EXPECT_EQ(s->sets[0].replicas, 5);
    EXPECT_FALSE(s->sets[1].exists);
    EXPECT_EQ(s->sets[1].name, "gone");
}

// The VMs a recheck asks about travel both ways, in order.
TEST(KubeProtocol, VirtualMachinesAskedAndAnsweredSurviveWhole) {
    auto r =
        decode(encode(Request{ReadStatefulSets{kApi, {}, {}, {{"shop", "vm1"}, {"lab", "vm2"}}}}));
    ASSERT_TRUE(r) << r.error().msg;
    const auto& asked = std::get<ReadStatefulSets>(*r);
    ASSERT_EQ(asked.vms.size(), 2u);
    EXPECT_EQ(asked.vms[1].namespace_, "lab");
    EXPECT_EQ(asked.vms[1].name, "vm2");
    StatefulSetsAnswer a;
    a.vms.push_back({"shop", "vm1", true, true});
    a.vms.push_back({"lab", "vm2", false, false});
    auto back = statefulsets_answer(to_json(a).dump());
    ASSERT_TRUE(back) << back.error().msg;
    ASSERT_EQ(back->vms.size(), 2u);
    EXPECT_TRUE(back->vms[0].exists);
    EXPECT_TRUE(back->vms[0].deleting);
    EXPECT_FALSE(back->vms[1].exists);
    EXPECT_EQ(back->vms[1].name, "vm2");
}

TEST(KubeProtocol, AnotherVersionOrAnUnknownOpIsRefusedWithCodeOne) {
    json j = json::parse(encode(Request{ReadPod{kApi, "shop", "web-0"}}));
    j["version"] = kVersion + 1;
    auto r = decode(j.dump());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Code::kIncompatibleVersion);
    EXPECT_NE(r.error().msg.find("version " + std::to_string(kVersion)), std::string::npos);
    j.erase("version");
    EXPECT_EQ(decode(j.dump()).error().code, Code::kIncompatibleVersion);
    j["version"] = "1";
    EXPECT_EQ(decode(j.dump()).error().code, Code::kIncompatibleVersion);
    j["version"] = kVersion;
    j["op"] = "watch-pods";
    r = decode(j.dump());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Code::kIncompatibleVersion);
    EXPECT_NE(r.error().msg.find("watch-pods"), std::string::npos);
    j.erase("op");
    EXPECT_EQ(decode(j.dump()).error().code, Code::kIncompatibleVersion);
}

TEST(KubeProtocol, AMissingOrEmptyFieldIsRefusedNamingIt) {
    for (const char* field : {"kubeconfig", "namespace", "name"}) {
        json j = json::parse(encode(Request{ReadPod{kApi, "shop", "web-0"}}));
        j.erase(field);
        auto r = decode(j.dump());
        ASSERT_FALSE(r) << field;
        EXPECT_EQ(r.error().code, Code::kInvalidConfig) << field;
        EXPECT_NE(r.error().msg.find(std::string("\"") + field + "\""), std::string::npos)
            << r.error().msg;
        j[field] = "";
        EXPECT_EQ(decode(j.dump()).error().code, Code::kInvalidConfig) << field;
    }
    json s = json::parse(encode(Request{ReadStatefulSets{kApi, {{"shop", "web"}}}}));
    s.erase("sets");
    EXPECT_EQ(decode(s.dump()).error().code, Code::kInvalidConfig);
    s["sets"] = json::array({{{"namespace", "shop"}}});
    auto r = decode(s.dump());
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().msg.find("\"name\""), std::string::npos) << r.error().msg;
    json b = json::parse(encode(Request{ReadPod{kApi, "shop", "web-0"}}));
    b["budgetMs"] = 0;
    EXPECT_EQ(decode(b.dump()).error().code, Code::kInvalidConfig) << "a budget of 0 is none";
    b["budgetMs"] = -5;
    EXPECT_EQ(decode(b.dump()).error().code, Code::kInvalidConfig);
}

TEST(KubeProtocol, TextThatIsNotAJsonObjectIsCodeSix) {
    EXPECT_EQ(decode("not json").error().code, Code::kDecode);
    EXPECT_EQ(decode("[1, 2]").error().code, Code::kDecode);
    EXPECT_EQ(decode("").error().code, Code::kDecode);
}

// Every field of a request and of an answer replaced by a value of every JSON type: refused (or
// read) as such, never thrown through. A plugin that died on an exception would answer the
// runtime nothing.
TEST(KubeProtocol, WrongTypedFieldsAreRefusedNotThrown) {
    const std::vector<json> values = {nullptr,
                                      1,
                                      -1,
                                      1.5,
                                      "x",
                                      "",
                                      true,
                                      json::array(),
                                      json::array({1}),
                                      json::object(),
                                      18446744073709551615ull};
    const json requests[] = {
        json::parse(encode(Request{ReadPod{kApi, "shop", "web-0"}})),
        json::parse(encode(Request{ReadStatefulSets{kApi, {{"shop", "web"}}}}))};
    for (const json& base : requests) {
        for (const auto& [field, _] : base.items()) {
            for (const json& v : values) {
                json j = base;
                j[field] = v;
                EXPECT_NO_THROW({
                    auto r = decode(j.dump());
                    if (!r) {
                        const Code c = r.error().code;
                        EXPECT_TRUE(c == Code::kInvalidConfig || c == Code::kIncompatibleVersion)
                            << field << "=" << v.dump() << ": " << r.error().msg;
                    }
                }) << field
                   << "=" << v.dump();
            }
        }
    }
    StatefulSetsAnswer sets;
    sets.sets.push_back({"shop", "web", true, false, 0, 2});
    const json answers[] = {to_json(pod()), to_json(sets), to_json(pod())["owners"][0],
                            to_json(sets)["sets"][0]};
    for (size_t k = 0; k < std::size(answers); ++k) {
        for (const auto& [field, _] : answers[k].items()) {
            for (const json& v : values) {
                json j = answers[k];
                j[field] = v;
                // Put a mutated owner or set back into its whole answer.
                json whole = k == 2 ? to_json(pod()) : k == 3 ? to_json(sets) : j;
                if (k == 2) whole["owners"][0] = j;
                if (k == 3) whole["sets"][0] = j;
                EXPECT_NO_THROW({
                    auto a = pod_answer(whole.dump());
                    auto s = statefulsets_answer(whole.dump());
                    if (!a) {
                        EXPECT_NE(a.error().code, Code::kOk);
                    }
                    if (!s) {
                        EXPECT_NE(s.error().code, Code::kOk);
                    }
                }) << field
                   << "=" << v.dump();
            }
        }
    }
}

TEST(KubeProtocol, AnAnswerCarryingAnErrorIsThatErrorAndNonsenseIsInternal) {
    auto e = pod_answer(base::envelope::error_json(
                            make_error(Code::kTryAgainLater, "GET https://x: unreachable", "why"))
                            .dump());
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().code, Code::kTryAgainLater);
    EXPECT_EQ(e.error().msg, "GET https://x: unreachable");
    EXPECT_EQ(e.error().details, "why");
    auto s = statefulsets_answer(
        base::envelope::error_json(make_error(Code::kInvalidConfig, "403")).dump());
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().code, Code::kInvalidConfig);
    EXPECT_EQ(pod_answer("{\"code\": \"7\"}").error().code, Code::kInternal);
    EXPECT_EQ(pod_answer("{\"code\": 0}").error().code, Code::kInternal) << "0 is no error code";
    EXPECT_EQ(pod_answer("{\"code\": -7}").error().code, Code::kInternal);
    EXPECT_EQ(pod_answer("Segmentation fault").error().code, Code::kInternal);
    EXPECT_EQ(pod_answer("{}").error().code, Code::kInternal) << "no uid";
    EXPECT_EQ(statefulsets_answer("{}").error().code, Code::kInternal);
    EXPECT_EQ(statefulsets_answer("{\"sets\": [1]}").error().code, Code::kInternal);
}

}  // namespace
}  // namespace shmipam::kube::protocol
