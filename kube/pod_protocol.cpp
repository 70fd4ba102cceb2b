#include "kube/pod_protocol.h"

namespace shmipam::kube::protocol {

using nlohmann::json;
namespace envelope = base::envelope;

namespace {

constexpr const char* kReadPod = "read-pod";
constexpr const char* kReadStatefulSets = "read-statefulsets";
constexpr const char* kRequestToken = "request-token";

Error field_error(const std::string& what, const std::string& field, const char* want) {
    return envelope::field_error(kProtocol, what, field, want);
}

// The envelope's readers of one object's fields, and the API settings every request carries;
// each answers code 7 naming the field. Never throw.
struct Reader : envelope::FieldReader {
    Reader(const json& object, std::string what)
        : FieldReader(kProtocol, object, std::move(what)), j(object) {}

    const json& j;

    Expected<Api> api() const {
        Api a;
        auto kubeconfig = text("kubeconfig");
        if (!kubeconfig) return kubeconfig.error();
        if (kubeconfig->empty()) return field_error("kubeconfig", "a path");
        a.kubeconfig = *kubeconfig;
        auto it = j.find("budgetMs");
        if (it != j.end() && !it->is_null()) {
            if (!it->is_number_unsigned() || it->get<uint64_t>() == 0) {
                return field_error("budgetMs", "a positive integer");
            }
            a.budget_ms = it->get<uint64_t>();
        }
        it = j.find("connectTimeoutMs");
        if (it != j.end() && !it->is_null()) {
            if (!it->is_number_unsigned() || it->get<uint64_t>() == 0) {
                return field_error("connectTimeoutMs", "a positive integer");
            }
            a.connect_timeout_ms = it->get<uint64_t>();
        }
        return a;
    }
};

void put_api(json& j, const Api& a) {
    j["kubeconfig"] = a.kubeconfig;
    j["budgetMs"] = a.budget_ms;
    j["connectTimeoutMs"] = a.connect_timeout_ms;
}

json request_json(const ReadPod& r) {
    json j = envelope::request_head(kProtocol, kReadPod);
    put_api(j, r.api);
    j["namespace"] = r.namespace_;
    j["name"] = r.name;
    return j;
}

json request_json(const ReadStatefulSets& r) {
    json j = envelope::request_head(kProtocol, kReadStatefulSets);
    put_api(j, r.api);
    json sets = json::array();
    for (const auto& s : r.sets) sets.push_back({{"namespace", s.namespace_}, {"name", s.name}});
    j["sets"] = sets;
    json pods = json::array();
    for (const auto& p : r.pods) pods.push_back({{"namespace", p.namespace_}, {"name", p.name}});
    j["pods"] = pods;
    json vms = json::array();
    for (const auto& v : r.vms) vms.push_back({{"namespace", v.namespace_}, {"name", v.name}});
    j["vms"] = vms;
    return j;
}

json request_json(const RequestToken& r) {
    json j = envelope::request_head(kProtocol, kRequestToken);
    put_api(j, r.api);
    j["namespace"] = r.namespace_;
    j["serviceAccount"] = r.service_account;
    j["expirationSeconds"] = r.expiration_seconds;
    return j;
}

Expected<ObjectRef> object_ref(const json& j, const std::string& what) {
    if (!j.is_object()) return field_error(what, "sets[]", "objects with namespace and name");
    const Reader rd{j, what};
    auto ns = rd.text("namespace");
    if (!ns) return ns.error();
    auto name = rd.text("name");
    if (!name) return name.error();
    if (ns->empty() || name->empty()) {
        return field_error(what, "namespace and name", "each not empty");
    }
    return ObjectRef{*ns, *name};
}

Expected<Request> decode_object(const json& j, const std::string& name) {
    const Reader rd{j, name + " request"};
    if (name == kReadPod) {
        auto api = rd.api();
        if (!api) return api.error();
        auto ns = rd.text("namespace");
        if (!ns) return ns.error();
        auto pod = rd.text("name");
        if (!pod) return pod.error();
        if (ns->empty() || pod->empty()) {
            return field_error(rd.what(), "namespace and name", "each not empty");
        }
        return Request{ReadPod{*api, *ns, *pod}};
    }
    if (name == kReadStatefulSets) {
        auto api = rd.api();
        if (!api) return api.error();
        ReadStatefulSets r{*api, {}};
        auto sets = j.find("sets");
        if (sets == j.end() || !sets->is_array()) {
            return field_error(rd.what(), "sets", "a list of {namespace, name}");
        }
        for (const auto& s : *sets) {
            auto ref = object_ref(s, rd.what());
            if (!ref) return ref.error();
            r.sets.push_back(*ref);
        }
        for (auto [key, into] : {std::pair{"pods", &r.pods}, std::pair{"vms", &r.vms}}) {
            auto list = j.find(key);
            if (list == j.end() || list->is_null()) continue;
            if (!list->is_array())
                return field_error(rd.what(), key, "a list of {namespace, name}");
            for (const auto& p : *list) {
                auto ref = object_ref(p, rd.what());
                if (!ref) return ref.error();
                into->push_back(*ref);
            }
        }
        return Request{std::move(r)};
    }
    if (name == kRequestToken) {
        auto api = rd.api();
        if (!api) return api.error();
        auto ns = rd.text("namespace");
        if (!ns) return ns.error();
        auto sa = rd.text("serviceAccount");
        if (!sa) return sa.error();
        auto seconds = rd.integer("expirationSeconds", 0);
        if (!seconds) return seconds.error();
        if (ns->empty() || sa->empty() || *seconds <= 0) {
            return field_error(rd.what(), "namespace, serviceAccount and expirationSeconds",
                               "each given, the seconds positive");
        }
        return Request{RequestToken{*api, *ns, *sa, *seconds}};
    }
    return envelope::unknown_op(kProtocol, name);
}

// The helper's answer as JSON: an error object is passed on with its code.
Expected<json> answer_object(std::string_view text) {
    return envelope::answer_object(kProtocol, text);
}

Error unparsed(const Error& e) {
    return make_error(Code::kInternal, "the Kubernetes helper's answer did not parse: " + e.msg);
}

}  // namespace

std::string encode(const Request& r) {
    return std::visit([](const auto& req) { return request_json(req).dump(); }, r);
}

Expected<Request> decode(std::string_view text) {
    auto received = envelope::receive(kProtocol, text);
    if (!received) return received.error();
    return decode_object(received->body, received->op);
}

json to_json(const PodAnswer& a) {
    json owners = json::array();
    for (const auto& o : a.owners) {
        owners.push_back({{"apiVersion", o.api_version},
                          {"kind", o.kind},
                          {"name", o.name},
                          {"uid", o.uid},
                          {"controller", o.controller}});
    }
    return {{"uid", a.uid},
            {"nodeName", a.node_name},
            {"labels", a.labels},
            {"annotations", a.annotations},
            {"owners", owners}};
}

json to_json(const StatefulSetsAnswer& a) {
    json sets = json::array();
    for (const auto& s : a.sets) {
        sets.push_back({{"namespace", s.namespace_},
                        {"name", s.name},
                        {"exists", s.exists},
                        {"deleting", s.deleting},
                        {"ordinalsStart", s.ordinals_start},
                        {"replicas", s.replicas}});
    }
    json pods = json::array();
    for (const auto& p : a.pods) {
        pods.push_back({{"namespace", p.namespace_},
                        {"name", p.name},
                        {"exists", p.exists},
                        {"nodeName", p.node_name}});
    }
    json vms = json::array();
    for (const auto& v : a.vms) {
        vms.push_back({{"namespace", v.namespace_},
                       {"name", v.name},
                       {"exists", v.exists},
                       {"deleting", v.deleting}});
    }
    return {{"sets", sets}, {"pods", pods}, {"vms", vms}};
}

json to_json(const TokenAnswer& a) {
    return {{"token", a.token}, {"expiresAt", a.expires_at}};
}

Expected<PodAnswer> pod_answer(std::string_view text) {
    auto j = answer_object(text);
    if (!j) return j.error();
    const Reader rd{*j, "read-pod answer"};
    PodAnswer a;
    auto uid = rd.text("uid");
    auto node = rd.text("nodeName", false);
    auto labels = rd.strings("labels");
    auto annotations = rd.strings("annotations");
    if (!uid) return unparsed(uid.error());
    if (!node) return unparsed(node.error());
    if (!labels) return unparsed(labels.error());
    if (!annotations) return unparsed(annotations.error());
    a.uid = *uid;
    a.node_name = *node;
    a.labels = std::move(*labels);
    a.annotations = std::move(*annotations);
    auto owners = j->find("owners");
    if (owners != j->end() && !owners->is_null()) {
        if (!owners->is_array()) {
            return unparsed(field_error(rd.what(), "owners", "a list of owner references"));
        }
        for (const auto& o : *owners) {
            if (!o.is_object()) {
                return unparsed(field_error(rd.what(), "owners", "a list of owner references"));
            }
            const Reader ord{o, "read-pod answer's owner"};
            OwnerReference ref;
            auto api_version = ord.text("apiVersion");
            auto kind = ord.text("kind");
            auto name = ord.text("name");
            auto owner_uid = ord.text("uid", false);
            auto controller = ord.flag("controller");
            if (!api_version) return unparsed(api_version.error());
            if (!kind) return unparsed(kind.error());
            if (!name) return unparsed(name.error());
            if (!owner_uid) return unparsed(owner_uid.error());
            if (!controller) return unparsed(controller.error());
            a.owners.push_back({*api_version, *kind, *name, *owner_uid, *controller});
        }
    }
    return a;
}

Expected<StatefulSetsAnswer> statefulsets_answer(std::string_view text) {
    auto j = answer_object(text);
    if (!j) return j.error();
    auto sets = j->find("sets");
    if (sets == j->end() || !sets->is_array()) {
        return unparsed(field_error("read-statefulsets answer", "sets", "a list"));
    }
    StatefulSetsAnswer a;
    for (const auto& s : *sets) {
        if (!s.is_object())
            return unparsed(field_error("read-statefulsets answer", "sets", "a list"));
        const Reader rd{s, "read-statefulsets answer"};
        StatefulSetAnswer one;
        auto ref = object_ref(s, rd.what());
        auto exists = rd.flag("exists");
        auto deleting = rd.flag("deleting");
        auto start = rd.integer("ordinalsStart", 0);
        auto replicas = rd.integer("replicas", 1);
        if (!ref) return unparsed(ref.error());
        if (!exists) return unparsed(exists.error());
        if (!deleting) return unparsed(deleting.error());
        if (!start) return unparsed(start.error());
        if (!replicas) return unparsed(replicas.error());
        one.namespace_ = ref->namespace_;
        one.name = ref->name;
        one.exists = *exists;
        one.deleting = *deleting;
        one.ordinals_start = *start;
        one.replicas = *replicas;
        a.sets.push_back(std::move(one));
    }
    // The optional lists "pods" and "vms": each item an object, read by `one`.
    auto each = [&](const char* key, const char* what, auto one) -> Status {
        auto list = j->find(key);
        if (list == j->end() || list->is_null()) return Ok{};
        if (!list->is_array()) return field_error("read-statefulsets answer", key, "a list");
        for (const auto& item : *list) {
            if (!item.is_object()) return field_error("read-statefulsets answer", key, "a list");
            if (auto st = one(Reader{item, what}); !st) return st;
        }
        return Ok{};
    };
    auto pods = each("pods", "read-statefulsets answer's pod", [&](const Reader& rd) -> Status {
        auto ref = object_ref(rd.j, rd.what());
        auto exists = rd.flag("exists");
        auto node = rd.text("nodeName", false);
        if (!ref) return ref.error();
        if (!exists) return exists.error();
        if (!node) return node.error();
        a.pods.push_back({ref->namespace_, ref->name, *exists, *node});
        return Ok{};
    });
    if (!pods) return unparsed(pods.error());
    auto vms = each("vms", "read-statefulsets answer's vm", [&](const Reader& rd) -> Status {
        auto ref = object_ref(rd.j, rd.what());
        auto exists = rd.flag("exists");
        auto deleting = rd.flag("deleting");
        if (!ref) return ref.error();
        if (!exists) return exists.error();
        if (!deleting) return deleting.error();
        a.vms.push_back({ref->namespace_, ref->name, *exists, *deleting});
        return Ok{};
    });
    if (!vms) return unparsed(vms.error());
    return a;
}

Expected<TokenAnswer> token_answer(std::string_view text) {
    auto j = answer_object(text);
    if (!j) return j.error();
    const Reader rd{*j, "request-token answer"};
    auto token = rd.text("token");
    auto expires = rd.integer("expiresAt", 0);
    if (!token) return unparsed(token.error());
    if (!expires) return unparsed(expires.error());
    if (token->empty() || *expires <= 0) {
        return unparsed(field_error(rd.what(), "token and expiresAt", "a token and a time"));
    }
    return TokenAnswer{*token, *expires};
}

}  // namespace shmipam::kube::protocol
