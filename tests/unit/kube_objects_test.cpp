// What the Kubernetes helper reads of the API server's answers (kube/objects.h,
// kube/api_status.h): a Pod's and a StatefulSet's fields with the API's defaults; an object that
// is not what was asked refused with 999 naming the field; Status bodies.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kube/api_client.h"
#include "kube/api_status.h"
#include "kube/objects.h"

namespace shmipam::kube {
namespace {

using nlohmann::json;

const std::string kWhere = "GET https://k/api/v1/namespaces/shop/pods/web-0";

json pod_json() {
    return json::parse(R"({
      "apiVersion": "v1", "kind": "Pod",
      "metadata": {"name": "web-0", "namespace": "shop", "uid": "u-1", "resourceVersion": "42",
                   "labels": {"app": "web"}, "annotations": {"a": "b"},
                   "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                        "name": "web", "uid": "s-1", "controller": true,
                                        "blockOwnerDeletion": true}],
                   "managedFields": [{"manager": "kube-controller-manager"}]},
      "spec": {"nodeName": "n-1", "containers": [{"name": "c", "image": "i"}]},
      "status": {"phase": "Running"}})");
}

TEST(KubeObjects, APodsUidLabelsAnnotationsOwnersAndNodeAreRead) {
    auto a = decode_pod(pod_json(), "shop", "web-0", kWhere);
    ASSERT_TRUE(a) << a.error().msg;
    EXPECT_EQ(a->uid, "u-1");
    EXPECT_EQ(a->node_name, "n-1");
    EXPECT_EQ(a->labels.at("app"), "web");
    EXPECT_EQ(a->annotations.at("a"), "b");
    ASSERT_EQ(a->owners.size(), 1u);
    EXPECT_EQ(a->owners[0].kind, "StatefulSet");
    EXPECT_TRUE(a->owners[0].controller);
    json bare = pod_json();
    bare["metadata"].erase("labels");
    bare["metadata"].erase("ownerReferences");
    bare.erase("spec");
    auto b = decode_pod(bare, "shop", "web-0", kWhere);
    ASSERT_TRUE(b) << b.error().msg;
    EXPECT_TRUE(b->labels.empty());
    EXPECT_TRUE(b->owners.empty());
    EXPECT_EQ(b->node_name, "") << "not scheduled yet";
}

TEST(KubeObjects, APodThatIsNotWhatWasAskedIs999NamingTheField) {
    struct Case {
        const char* what;
        json pod;
        const char* said;
    };
    auto with = [](const json::json_pointer& at, json v) {
        json p = pod_json();
        p[at] = std::move(v);
        return p;
    };
    const std::vector<Case> cases = {
        {"kind", with("/kind"_json_pointer, "Service"), "is a \"Service\", not a Pod"},
        {"name", with("/metadata/name"_json_pointer, "web-1"), "not shop/web-0"},
        {"namespace", with("/metadata/namespace"_json_pointer, "other"), "not shop/web-0"},
        {"uid", with("/metadata/uid"_json_pointer, nullptr), "metadata.uid is not set"},
        {"labels", with("/metadata/labels"_json_pointer, json::array()),
         "metadata.labels is not a map of strings"},
        {"label value", with("/metadata/labels/app"_json_pointer, 3),
         "metadata.labels.app is not a string"},
        {"owners", with("/metadata/ownerReferences"_json_pointer, "x"),
         "metadata.ownerReferences is not a list"},
        {"owner", with("/metadata/ownerReferences/0"_json_pointer, 1),
         "metadata.ownerReferences[0] is not an object"},
        {"controller", with("/metadata/ownerReferences/0/controller"_json_pointer, "yes"),
         "metadata.ownerReferences[0].controller is not true or false"},
        {"owner kind", with("/metadata/ownerReferences/0/kind"_json_pointer, nullptr),
         "ownerReferences[0].kind and name is not set"},
        {"spec", with("/spec"_json_pointer, 1), "spec is not an object"},
        {"nodeName", with("/spec/nodeName"_json_pointer, json::object()),
         "spec.nodeName is not a string"},
    };
    for (const Case& c : cases) {
        auto a = decode_pod(c.pod, "shop", "web-0", kWhere);
        ASSERT_FALSE(a) << c.what;
        EXPECT_EQ(a.error().code, Code::kInternal) << c.what;
        EXPECT_NE(a.error().msg.find(kWhere), std::string::npos) << a.error().msg;
        EXPECT_NE(a.error().msg.find(c.said), std::string::npos) << c.what << ": "
                                                                 << a.error().msg;
    }
    EXPECT_FALSE(decode_pod(json::array(), "shop", "web-0", kWhere));
}

TEST(KubeObjects, AStatefulSetsDeletionReplicasAndFirstOrdinalAreReadWithTheApisDefaults) {
    json set = json::parse(R"({"apiVersion": "apps/v1", "kind": "StatefulSet",
      "metadata": {"name": "web", "namespace": "shop", "uid": "s-1",
                   "deletionTimestamp": "2026-01-01T00:00:00Z"},
      "spec": {"replicas": 4, "ordinals": {"start": 10}, "serviceName": "web"}})");
    auto a = decode_statefulset(set, "shop", "web", kWhere);
    ASSERT_TRUE(a) << a.error().msg;
    EXPECT_TRUE(a->exists);
    EXPECT_TRUE(a->deleting);
    EXPECT_EQ(a->replicas, 4);
    EXPECT_EQ(a->ordinals_start, 10);
    EXPECT_EQ(a->namespace_, "shop");
    EXPECT_EQ(a->name, "web");
    set["metadata"].erase("deletionTimestamp");
    set["spec"].erase("replicas");
    set["spec"].erase("ordinals");
    auto d = decode_statefulset(set, "shop", "web", kWhere);
    ASSERT_TRUE(d) << d.error().msg;
    EXPECT_FALSE(d->deleting);
    EXPECT_EQ(d->replicas, 1);
    EXPECT_EQ(d->ordinals_start, 0);
    set["spec"]["replicas"] = -1;
    EXPECT_EQ(decode_statefulset(set, "shop", "web", kWhere).error().code, Code::kInternal);
    set["spec"]["replicas"] = "3";
    EXPECT_EQ(decode_statefulset(set, "shop", "web", kWhere).error().code, Code::kInternal);
    set["spec"]["replicas"] = 0;
    set["spec"]["ordinals"] = 5;
    EXPECT_EQ(decode_statefulset(set, "shop", "web", kWhere).error().code, Code::kInternal);
    set["spec"]["ordinals"] = json::object();
    set["kind"] = "Deployment";
    EXPECT_EQ(decode_statefulset(set, "shop", "web", kWhere).error().code, Code::kInternal);
}

TEST(KubeObjects, AStatusBodyIsDecodedAndAnythingElseIsQuoted) {
    const std::string body =
        R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
        R"("message":"pods \"web-0\" not found","reason":"NotFound",)"
        R"("details":{"name":"web-0","kind":"pods"},"code":404})";
    auto s = decode_status(body);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->status, "Failure");
    EXPECT_EQ(s->reason, "NotFound");
    EXPECT_EQ(s->message, "pods \"web-0\" not found");
    EXPECT_EQ(s->code, 404);
    EXPECT_EQ(s->details_name, "web-0");
    EXPECT_EQ(s->details_kind, "pods");
    EXPECT_EQ(describe_answer(404, body), "HTTP 404 NotFound: pods \"web-0\" not found");
    EXPECT_FALSE(decode_status("<html>bad gateway</html>"));
    EXPECT_FALSE(decode_status(R"({"kind": "Pod"})"));
    EXPECT_FALSE(decode_status(""));
    auto odd = decode_status(R"({"kind": "Status", "code": "x", "reason": 5, "details": 1})");
    ASSERT_TRUE(odd) << "mistyped fields left empty";
    EXPECT_EQ(odd->code, 0);
    EXPECT_EQ(odd->reason, "");
    EXPECT_EQ(describe_answer(502, "<html>\nbad gateway\n</html>"),
              "HTTP 502: <html> bad gateway </html>");
    EXPECT_EQ(describe_answer(502, std::string(300, 'x')).size(), std::string("HTTP 502: ").size() + 203);
}

TEST(KubeObjects, ResourcesHaveTheApiServersPathsAndRbacNames) {
    EXPECT_EQ(pod_resource("shop", "web-0").path(), "/api/v1/namespaces/shop/pods/web-0");
    EXPECT_EQ(pod_resource("shop", "web-0").what(), "pods");
    EXPECT_EQ(statefulset_resource("shop", "web").path(),
              "/apis/apps/v1/namespaces/shop/statefulsets/web");
    EXPECT_EQ(statefulset_resource("shop", "web").what(), "statefulsets.apps");
}

}  // namespace
}  // namespace shmipam::kube
