#include "kube/objects.h"

namespace shmipam::kube {

using nlohmann::json;

namespace {

// Reads fields of one object; every error is 999 naming the URL and the field's path.
struct Fields {
    const json& j;
    std::string prefix;  // "metadata.", "spec.", ...
    const std::string& where;

    Error bad(const std::string& field, const char* want) const {
        const std::string path =
            field.empty() ? prefix.substr(0, prefix.size() - 1) : prefix + field;
        return make_error(Code::kInternal, where + ": the answer's " + path + " is not " + want);
    }
    // Absent or null: "".
    Expected<std::string> text(const char* f) const {
        auto it = j.find(f);
        if (it == j.end() || it->is_null()) return std::string();
        if (!it->is_string()) return bad(f, "a string");
        return it->get<std::string>();
    }
    Expected<int64_t> integer(const char* f, int64_t fallback) const {
        auto it = j.find(f);
        if (it == j.end() || it->is_null()) return fallback;
        if (!it->is_number_integer() || it->get<int64_t>() < 0) {
            return bad(f, "an integer of at least 0");
        }
        return it->get<int64_t>();
    }
    Expected<protocol::StringMap> strings(const char* f) const {
        protocol::StringMap out;
        auto it = j.find(f);
        if (it == j.end() || it->is_null()) return out;
        if (!it->is_object()) return bad(f, "a map of strings");
        for (const auto& [k, v] : it->items()) {
            if (!v.is_string()) return bad(std::string(f) + "." + k, "a string");
            out[k] = v.get<std::string>();
        }
        return out;
    }
    // A nested object (absent or null: an empty one).
    Expected<Fields> object(const char* f, const json& empty) const {
        auto it = j.find(f);
        if (it == j.end() || it->is_null()) return Fields{empty, prefix + f + ".", where};
        if (!it->is_object()) return bad(f, "an object");
        return Fields{*it, prefix + f + ".", where};
    }
};

const json& empty_object() {
    static const json kEmpty = json::object();
    return kEmpty;
}

// The object's kind and metadata, checked against what was asked.
Expected<Fields> metadata_of(const json& obj, const char* kind, const std::string& ns,
                             const std::string& name, const std::string& where) {
    const Fields top{obj, "", where};
    auto k = top.text("kind");
    if (!k) return k.error();
    if (*k != kind) {
        return make_error(Code::kInternal, where + ": the answer is a \"" + *k + "\", not a " +
                                               kind + " (is the server the API server?)");
    }
    auto meta = top.object("metadata", empty_object());
    if (!meta) return meta.error();
    auto got_name = meta->text("name");
    if (!got_name) return got_name.error();
    auto got_ns = meta->text("namespace");
    if (!got_ns) return got_ns.error();
    if (*got_name != name || (!got_ns->empty() && *got_ns != ns)) {
        return make_error(Code::kInternal, where + ": the answer is " + kind + " " + *got_ns + "/" +
                                               *got_name + ", not " + ns + "/" + name);
    }
    return meta;
}

Expected<protocol::OwnerReference> owner_of(const json& o, const std::string& where, size_t i) {
    const Fields f{o, "metadata.ownerReferences[" + std::to_string(i) + "].", where};
    if (!o.is_object()) return f.bad("", "an object");
    protocol::OwnerReference ref;
    for (auto [field, out] :
         {std::pair{"apiVersion", &ref.api_version}, std::pair{"kind", &ref.kind},
          std::pair{"name", &ref.name}, std::pair{"uid", &ref.uid}}) {
        auto v = f.text(field);
        if (!v) return v.error();
        *out = std::move(*v);
    }
    if (ref.kind.empty() || ref.name.empty()) return f.bad("kind and name", "set");
    if (auto c = o.find("controller"); c != o.end() && !c->is_null()) {
        if (!c->is_boolean()) return f.bad("controller", "true or false");
        ref.controller = c->get<bool>();
    }
    return ref;
}

}  // namespace

Expected<protocol::PodAnswer> decode_pod(const json& pod, const std::string& ns,
                                         const std::string& name, const std::string& where) {
    if (!pod.is_object())
        return make_error(Code::kInternal, where + ": the answer is not an object");
    auto meta = metadata_of(pod, "Pod", ns, name, where);
    if (!meta) return meta.error();
    protocol::PodAnswer a;
    auto uid = meta->text("uid");
    if (!uid) return uid.error();
    // Every object the API server keeps has a uid: the plugin checks it against K8S_POD_UID.
    if (uid->empty()) return meta->bad("uid", "set");
    a.uid = std::move(*uid);
    auto labels = meta->strings("labels");
    if (!labels) return labels.error();
    a.labels = std::move(*labels);
    auto annotations = meta->strings("annotations");
    if (!annotations) return annotations.error();
    a.annotations = std::move(*annotations);
    if (auto owners = meta->j.find("ownerReferences");
        owners != meta->j.end() && !owners->is_null()) {
        if (!owners->is_array()) return meta->bad("ownerReferences", "a list");
        for (size_t i = 0; i < owners->size(); ++i) {
            auto ref = owner_of((*owners)[i], where, i);
            if (!ref) return ref.error();
            a.owners.push_back(std::move(*ref));
        }
    }
    auto spec = Fields{pod, "", where}.object("spec", empty_object());
    if (!spec) return spec.error();
    auto node = spec->text("nodeName");
    if (!node) return node.error();
    a.node_name = std::move(*node);
    return a;
}

Expected<protocol::StatefulSetAnswer> decode_statefulset(const json& set, const std::string& ns,
                                                         const std::string& name,
                                                         const std::string& where) {
    if (!set.is_object())
        return make_error(Code::kInternal, where + ": the answer is not an object");
    auto meta = metadata_of(set, "StatefulSet", ns, name, where);
    if (!meta) return meta.error();
    protocol::StatefulSetAnswer a;
    a.namespace_ = ns;
    a.name = name;
    a.exists = true;
    auto deletion = meta->j.find("deletionTimestamp");
    a.deleting = deletion != meta->j.end() && !deletion->is_null();
    auto spec = Fields{set, "", where}.object("spec", empty_object());
    if (!spec) return spec.error();
    auto replicas = spec->integer("replicas", 1);
    if (!replicas) return replicas.error();
    a.replicas = *replicas;
    auto ordinals = spec->object("ordinals", empty_object());
    if (!ordinals) return ordinals.error();
    auto start = ordinals->integer("start", 0);
    if (!start) return start.error();
    a.ordinals_start = *start;
    return a;
}

Expected<protocol::VmAnswer> decode_vm(const json& vm, const std::string& ns,
                                       const std::string& name, const std::string& where) {
    if (!vm.is_object())
        return make_error(Code::kInternal, where + ": the answer is not an object");
    auto meta = metadata_of(vm, "VirtualMachine", ns, name, where);
    if (!meta) return meta.error();
    auto deletion = meta->j.find("deletionTimestamp");
    return protocol::VmAnswer{ns, name, true, deletion != meta->j.end() && !deletion->is_null()};
}

}  // namespace shmipam::kube
