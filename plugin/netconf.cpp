#include "plugin/netconf.h"

#include <cmath>
#include <cstdio>
#include <tuple>

#include "ipam/config_fields.h"
#include "plugin/cni_env.h"

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

// Where the network's state lives: dataDir (journal), runDir (arenas), and resolvConf.
Status parse_state_dirs(const json& ipam, NetConf& nc) {
    auto data_dir = opt_string(ipam, "dataDir", "ipam.");
    if (!data_dir) return data_dir.error();
    if (!data_dir->empty()) nc.network.data_dir = *data_dir;
    auto run_dir = opt_string(ipam, "runDir", "ipam.");
    if (!run_dir) return run_dir.error();
    if (!run_dir->empty()) nc.network.run_dir = *run_dir;
    if (nc.network.data_dir.size() >= 255 || nc.network.run_dir.size() >= 255) {
        return make_error(Code::kInvalidConfig,
                          "dataDir and runDir must be shorter than 255 bytes");
    }
    auto resolv = opt_string(ipam, "resolvConf", "ipam.");
    if (!resolv) return resolv.error();
    nc.resolv_conf = *resolv;
    return Ok{};
}

// The range sets: runtimeConfig.ipRanges, then the legacy single range, then "ranges"
// (host-local's order), validated together. `runtime` is runtimeConfig when present.
Status parse_ranges(const json& doc, const json& ipam, const json*& runtime, NetConf& nc) {
    std::vector<engine::RangeSet> sets;
    runtime = nullptr;
    if (auto rc = doc.find("runtimeConfig"); rc != doc.end() && !rc->is_null()) {
        if (!rc->is_object()) return type_error("runtimeConfig", "an object");
        runtime = &*rc;
        if (auto r = rc->find("ipRanges"); r != rc->end() && !r->is_null()) {
            auto rs = parse_range_sets(*r, "runtimeConfig.ipRanges");
            if (!rs) return rs.error();
            sets = *rs;
        }
    }
    auto legacy = parse_range_spec(ipam, "ipam");
    if (!legacy) return legacy.error();
    if (!legacy->subnet.empty()) {
        auto set = engine::make_range_set({*legacy});
        if (!set) return make_error(Code::kInvalidConfig, "invalid range set: " + set.error().msg);
        sets.push_back(*set);
    }
    if (auto r = ipam.find("ranges"); r != ipam.end() && !r->is_null()) {
        auto rs = parse_range_sets(*r, "ipam.ranges");
        if (!rs) return rs.error();
        sets.insert(sets.end(), rs->begin(), rs->end());
    }
    if (auto st = engine::check_range_sets(sets); !st) return st.error();
    if (sets.size() > engine::kMaxRangeSets) {
        return make_error(Code::kInvalidConfig, "at most " + std::to_string(engine::kMaxRangeSets) +
                                                    " range sets are supported");
    }
    nc.network.range_sets = std::move(sets);
    return Ok{};
}

// Routes are handed back as configured; each needs a CIDR "dst".
Status parse_routes(const json& ipam, NetConf& nc) {
    if (auto it = ipam.find("routes"); it != ipam.end() && !it->is_null()) {
        if (!it->is_array()) return type_error("ipam.routes", "an array");
        for (const auto& r : *it) {
            if (!r.is_object() || !r.contains("dst") || !r["dst"].is_string()) {
                return type_error("ipam.routes[]", "an object with a string \"dst\"");
            }
            if (!engine::Cidr::parse(r["dst"].get<std::string>())) {
                return make_error(Code::kInvalidConfig,
                                  "invalid route dst " + r["dst"].get<std::string>());
            }
            if (r.contains("gw") &&
                !(r["gw"].is_string() && engine::IpAddress::parse(r["gw"].get<std::string>()))) {
                return make_error(Code::kInvalidConfig, "invalid route gw in " + r.dump());
            }
            nc.routes.push_back(r);
        }
    }
    return Ok{};
}

// Requested addresses: args.cni.ips > runtimeConfig.ips > CNI_ARGS IP=.
Status parse_requested(const json& doc, const json* runtime, const CniArgs& args, NetConf& nc) {
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
    if (runtime != nullptr) {
        if (auto ips = runtime->find("ips"); ips != runtime->end() && !ips->is_null()) {
            auto l = parse_ip_list(*ips, "runtimeConfig.ips");
            if (!l) return l.error();
            from_runtime = *l;
        }
    }
    nc.requested_ips = !from_args.empty()      ? from_args
                       : !from_runtime.empty() ? from_runtime
                                               : args.ips;
    return Ok{};
}

// GC's list of attachments that are still valid (cni.dev/valid-attachments).
Status parse_valid_attachments(const json& doc, NetConf& nc) {
    if (auto v = doc.find("cni.dev/valid-attachments"); v != doc.end() && !v->is_null()) {
        if (!v->is_array()) return type_error("cni.dev/valid-attachments", "an array");
        std::vector<engine::AttachmentKey> keys;
        for (const auto& a : *v) {
            if (!a.is_object() || !a.contains("containerID") || !a["containerID"].is_string() ||
                !a.contains("ifname") || !a["ifname"].is_string()) {
                return type_error("cni.dev/valid-attachments[]",
                                  "an object with string containerID and ifname");
            }
            keys.push_back({a["containerID"].get<std::string>(), a["ifname"].get<std::string>()});
        }
        nc.valid_attachments = std::move(keys);
    }
    return Ok{};
}

// The pod's annotations (containerd's runtimeConfig capability) and labels (args.cni.labels).
Status parse_pod_metadata(const json& doc, NetConf& nc) {
    if (auto rc = doc.find("runtimeConfig"); rc != doc.end() && rc->is_object()) {
        if (auto a = rc->find("io.kubernetes.cri.pod-annotations");
            a != rc->end() && !a->is_null()) {
            if (!a->is_object()) {
                return type_error("runtimeConfig.io.kubernetes.cri.pod-annotations",
                                  "an object of strings");
            }
            for (const auto& [k, v] : a->items()) {
                if (!v.is_string()) {
                    return type_error("runtimeConfig.io.kubernetes.cri.pod-annotations." + k,
                                      "a string");
                }
                nc.pod_annotations[k] = v.get<std::string>();
            }
        }
    }
    if (auto a = doc.find("args"); a != doc.end() && a->is_object()) {
        if (auto c = a->find("cni"); c != a->end() && c->is_object()) {
            if (auto l = c->find("labels"); l != c->end() && !l->is_null()) {
                if (!l->is_array()) return type_error("args.cni.labels", "a list of {key, value}");
                for (const auto& kv : *l) {
                    if (!kv.is_object() || !kv.contains("key") || !kv["key"].is_string() ||
                        !kv.contains("value") || !kv["value"].is_string()) {
                        return type_error("args.cni.labels[]",
                                          "an object with string key and value");
                    }
                    nc.pod_labels[kv["key"].get<std::string>()] = kv["value"].get<std::string>();
                }
            }
        }
    }
    return Ok{};
}

}  // namespace

Expected<NetConf> parse_netconf(const json& doc, const CniArgs& args) {
    NetConf nc;
    auto version = read_cni_version(doc);
    if (!version) return version.error();
    nc.cni_version = *version;

    auto name = opt_string(doc, "name", "");
    if (!name) return name.error();
    if (auto st = validate_network_name(*name); !st) return st.error();
    nc.network.name = *name;

    auto ipam_it = doc.find("ipam");
    if (ipam_it == doc.end() || ipam_it->is_null()) {
        return make_error(Code::kInvalidConfig, "IPAM config missing 'ipam' key");
    }
    const json& ipam = *ipam_it;
    if (!ipam.is_object()) return type_error("ipam", "an object");

    const json* runtime = nullptr;
    if (auto st = parse_state_dirs(ipam, nc); !st) return st.error();
    auto pool_mode = ipam::parse_pool_mode(doc, ipam);
    if (!pool_mode) return pool_mode.error();
    nc.pool_mode = std::move(*pool_mode);
    if (nc.pool_mode) {
        if (auto rc = doc.find("runtimeConfig"); rc != doc.end() && rc->is_object()) runtime = &*rc;
    } else if (auto st = parse_ranges(doc, ipam, runtime, nc); !st) {
        return st.error();
    }
    // Both modes: pools select by them, and fixed addresses are asked for by annotation.
    if (auto st = parse_pod_metadata(doc, nc); !st) return st.error();
    if (auto it = ipam.find("statefulSetFixedIP"); it != ipam.end() && !it->is_null()) {
        if (!it->is_boolean()) return type_error("ipam.statefulSetFixedIP", "a boolean");
        nc.statefulset_fixed_ip = it->get<bool>();
    }
    auto kubernetes = ipam::parse_kubernetes(ipam);
    if (!kubernetes) return kubernetes.error();
    nc.kubernetes = std::move(*kubernetes);
    if (auto st = parse_state_knobs(ipam, nc.network); !st) return st.error();
    ipam::apply_block_size_defaults(ipam, nc.pool_mode, nc.network);
    if (auto st = parse_routes(ipam, nc); !st) return st.error();
    if (auto st = parse_requested(doc, runtime, args, nc); !st) return st.error();
    if (auto p = doc.find("prevResult"); p != doc.end() && !p->is_null()) nc.prev_result = *p;
    if (auto st = parse_valid_attachments(doc, nc); !st) return st.error();
    return nc;
}

}  // namespace shmipam::cni
