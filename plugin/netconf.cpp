#include "plugin/netconf.h"

#include <cmath>
#include <cstdio>
#include <tuple>

#include "ipam/config.h"
#include "ipam/config_fields.h"

namespace shmipam::cni {

using nlohmann::json;
using namespace ipam::config_fields;  // NOLINT(google-build-using-namespace): the field readers

bool version_at_least(const std::string& a, const std::string& b) {
    int a1 = 0, a2 = 0, a3 = 0, b1 = 0, b2 = 0, b3 = 0;
    std::sscanf(a.c_str(), "%d.%d.%d", &a1, &a2, &a3);
    std::sscanf(b.c_str(), "%d.%d.%d", &b1, &b2, &b3);
    return std::tie(a1, a2, a3) >= std::tie(b1, b2, b3);
}

Expected<std::string> read_cni_version(const json& doc) {
    if (!doc.is_object()) return make_error(Code::kDecode, "network config is not a JSON object");
    auto it = doc.find("cniVersion");
    // As the reference library: a config without a version is 0.1.0, which we do not speak.
    std::string v = "0.1.0";
    if (it != doc.end() && !it->is_null()) {
        if (!it->is_string()) return type_error("cniVersion", "a string");
        v = it->get<std::string>();
    }
    for (const auto& s : supported_versions()) {
        if (s == v) return v;
    }
    std::string list;
    for (const auto& s : supported_versions()) list += (list.empty() ? "" : ", ") + s;
    return make_error(Code::kIncompatibleVersion, "incompatible CNI versions",
                      "config is \"" + v + "\", plugin supports [" + list + "]");
}

Expected<engine::IpAddress> parse_requested_ip(const std::string& text) {
    const size_t slash = text.find('/');
    auto a = engine::IpAddress::parse(text.substr(0, slash));
    if (!a)
        return make_error(Code::kInvalidConfig, "invalid requested IP address \"" + text + "\"");
    if (slash != std::string::npos && !engine::Cidr::parse(text)) {
        return make_error(Code::kInvalidConfig, "invalid requested IP address \"" + text + "\"");
    }
    return *a;
}

namespace {

// Requested addresses: args.cni.ips, else runtimeConfig.ips, else CNI_ARGS IP=.
Expected<std::vector<std::string>> requested_texts(const json& doc, const CniArgs& args) {
    std::vector<std::string> from_args, from_runtime;
    if (auto a = doc.find("args"); a != doc.end() && a->is_object()) {
        if (auto c = a->find("cni"); c != a->end() && c->is_object()) {
            if (auto ips = c->find("ips"); ips != c->end() && !ips->is_null()) {
                auto l = parse_ip_list(*ips, "args.cni.ips");
                if (!l) return l.error();
                from_args = *l;
            }
        }
    }
    if (auto rc = doc.find("runtimeConfig"); rc != doc.end() && rc->is_object()) {
        if (auto ips = rc->find("ips"); ips != rc->end() && !ips->is_null()) {
            auto l = parse_ip_list(*ips, "runtimeConfig.ips");
            if (!l) return l.error();
            from_runtime = *l;
        }
    }
    return !from_args.empty() ? from_args : !from_runtime.empty() ? from_runtime : args.ips;
}

}  // namespace

Expected<ipam::Request> parse_request(const json& doc, const CniEnv& env, const CniArgs& args) {
    auto settings = ipam::read_network_settings(doc);
    if (!settings) return settings.error();
    // Both modes: pools select by them, and fixed addresses are asked for by annotation.
    auto metadata = ipam::read_pod_metadata(doc);
    if (!metadata) return metadata.error();
    auto requested = requested_texts(doc, args);
    if (!requested) return requested.error();
    ipam::Request r;
    static_cast<ipam::NetworkSettings&>(r) = std::move(*settings);
    r.key = {env.container_id, env.ifname};
    r.pod = {args.pod_namespace, args.pod_name, args.pod_uid, std::move(metadata->annotations),
             std::move(metadata->labels)};
    for (const auto& text : *requested) {
        auto a = parse_requested_ip(text);
        if (!a) return a.error();
        r.requested.push_back(*a);
    }
    if (auto p = doc.find("prevResult"); p != doc.end() && !p->is_null()) r.prev_result = *p;
    if (auto v = doc.find("cni.dev/valid-attachments"); v != doc.end() && !v->is_null()) {
        auto keys = ipam::read_valid_attachments(*v, "cni.dev/valid-attachments");
        if (!keys) return keys.error();
        r.valid_attachments = std::move(*keys);
    }
    return r;
}

}  // namespace shmipam::cni
