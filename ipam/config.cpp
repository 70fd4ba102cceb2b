#include "ipam/config.h"

#include "ipam/config_fields.h"

namespace shmipam::ipam {

using nlohmann::json;
using namespace config_fields;  // NOLINT(google-build-using-namespace): the field readers

namespace {

// The longest dataDir or runDir: the arena's header keeps dataDir NUL-terminated in
// shm::kDataDirBytes (256), and runDir is held to the same.
constexpr size_t kMaxStateDirBytes = 254;
// The ipam type a .conflist names its shmipam plugin's section by.
constexpr const char* kIpamType = "shmipam";

// Where the network's state lives: dataDir (journal), runDir (arenas), and resolvConf.
Status read_state_dirs(const json& ipam, NetworkSettings& s) {
    auto data_dir = opt_string(ipam, "dataDir", "ipam.");
    if (!data_dir) return data_dir.error();
    if (!data_dir->empty()) s.network.data_dir = *data_dir;
    auto run_dir = opt_string(ipam, "runDir", "ipam.");
    if (!run_dir) return run_dir.error();
    if (!run_dir->empty()) s.network.run_dir = *run_dir;
    if (s.network.data_dir.size() > kMaxStateDirBytes ||
        s.network.run_dir.size() > kMaxStateDirBytes) {
        return make_error(Code::kInvalidConfig,
                          "dataDir and runDir must be shorter than 255 bytes");
    }
    auto resolv = opt_string(ipam, "resolvConf", "ipam.");
    if (!resolv) return resolv.error();
    s.resolv_conf = *resolv;
    return Ok{};
}

// The range sets: runtimeConfig.ipRanges, then the legacy single range, then "ranges"
// (host-local's order), validated together.
Status read_ranges(const json& doc, const json& ipam, NetworkSettings& s) {
    std::vector<engine::RangeSet> sets;
    if (auto rc = doc.find("runtimeConfig"); rc != doc.end() && !rc->is_null()) {
        if (!rc->is_object()) return type_error("runtimeConfig", "an object");
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
    s.network.range_sets = std::move(sets);
    return Ok{};
}

// Routes are handed back as configured; each needs a CIDR "dst".
Status read_routes(const json& ipam, NetworkSettings& s) {
    const auto it = ipam.find("routes");
    if (it == ipam.end() || it->is_null()) return Ok{};
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
        s.routes.push_back(r);
    }
    return Ok{};
}

bool is_shmipam_section(const json& plugin) {
    if (!plugin.is_object()) return false;
    const auto ipam = plugin.find("ipam");
    if (ipam == plugin.end() || !ipam->is_object()) return false;
    const auto type = ipam->find("type");
    return type != ipam->end() && type->is_string() && type->get<std::string>() == kIpamType;
}

}  // namespace

Expected<NetworkSettings> read_network_settings(const json& doc,
                                                const SettingsOverrides& overrides) {
    if (!doc.is_object()) return make_error(Code::kDecode, "network config is not a JSON object");
    NetworkSettings s;
    auto name = opt_string(doc, "name", "");
    if (!name) return name.error();
    if (auto st = validate_network_name(*name); !st) return st.error();
    s.network.name = *name;

    const auto ipam_it = doc.find("ipam");
    if (ipam_it == doc.end() || ipam_it->is_null()) {
        return make_error(Code::kInvalidConfig, "IPAM config missing 'ipam' key");
    }
    if (!ipam_it->is_object()) return type_error("ipam", "an object");
    // A node name the caller gives stands for ipam.nodeName (a tool's --node).
    json named;
    const json* ipam = &*ipam_it;
    if (!overrides.node_name.empty()) {
        named = *ipam_it;
        named["nodeName"] = overrides.node_name;
        ipam = &named;
    }
    if (!overrides.run_dir.empty()) s.network.run_dir = overrides.run_dir;
    if (auto st = read_state_dirs(*ipam, s); !st) return st.error();
    auto pool_mode = parse_pool_mode(doc, *ipam);
    if (!pool_mode) return pool_mode.error();
    s.pools = std::move(*pool_mode);
    if (!s.pools) {
        if (auto st = read_ranges(doc, *ipam, s); !st) return st.error();
    }
    if (auto it = ipam->find("statefulSetFixedIP"); it != ipam->end() && !it->is_null()) {
        if (!it->is_boolean()) return type_error("ipam.statefulSetFixedIP", "a boolean");
        s.statefulset_fixed_ip = it->get<bool>();
    }
    auto kubernetes = parse_kubernetes(*ipam);
    if (!kubernetes) return kubernetes.error();
    s.kubernetes = std::move(*kubernetes);
    if (auto st = parse_state_knobs(*ipam, s.network); !st) return st.error();
    apply_block_size_defaults(*ipam, s.pools, s.network);
    if (auto st = read_routes(*ipam, s); !st) return st.error();
    return s;
}

Expected<json> network_config_of(std::string_view text, const std::string& origin) {
    json doc = json::parse(text, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) {
        return make_error(Code::kDecode, origin + " is not a JSON object (a network config)");
    }
    const auto plugins = doc.find("plugins");
    if (plugins == doc.end() || !plugins->is_array()) {
        if (!doc.contains("ipam")) {
            return make_error(Code::kDecode, origin + " is a network config with no ipam section");
        }
        return doc;
    }
    // A .conflist: shmipam's plugin, by its ipam type, else the only one with an ipam section.
    const json* chosen = nullptr;
    size_t with_ipam = 0;
    const json* only = nullptr;
    for (const auto& p : *plugins) {
        if (is_shmipam_section(p) && chosen == nullptr) chosen = &p;
        if (p.is_object() && p.contains("ipam") && p["ipam"].is_object()) {
            ++with_ipam;
            only = &p;
        }
    }
    if (chosen == nullptr && with_ipam == 1) chosen = only;
    if (chosen == nullptr) {
        return make_error(Code::kDecode, origin +
                                             " is a network config list with no plugin whose "
                                             "ipam section is shmipam's (\"type\": \"shmipam\")");
    }
    json out = *chosen;
    for (const char* k : {"name", "cniVersion"}) {
        if (doc.contains(k)) out[k] = doc[k];
    }
    return out;
}

Expected<NetworkSettings> read_network_text(std::string_view text, const std::string& origin,
                                            const SettingsOverrides& overrides) {
    auto doc = network_config_of(text, origin);
    if (!doc) return doc.error();
    auto s = read_network_settings(*doc, overrides);
    if (!s) {
        Error e = s.error();
        e.msg = origin + ": " + e.msg;
        return e;
    }
    return s;
}

Expected<PodMetadata> read_pod_metadata(const json& doc) {
    PodMetadata out;
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
                out.annotations[k] = v.get<std::string>();
            }
        }
    }
    const auto a = doc.find("args");
    if (a == doc.end() || !a->is_object()) return out;
    const auto c = a->find("cni");
    if (c == a->end() || !c->is_object()) return out;
    const auto l = c->find("labels");
    if (l == c->end() || l->is_null()) return out;
    if (!l->is_array()) return type_error("args.cni.labels", "a list of {key, value}");
    for (const auto& kv : *l) {
        if (!kv.is_object() || !kv.contains("key") || !kv["key"].is_string() ||
            !kv.contains("value") || !kv["value"].is_string()) {
            return type_error("args.cni.labels[]", "an object with string key and value");
        }
        out.labels[kv["key"].get<std::string>()] = kv["value"].get<std::string>();
    }
    return out;
}

Expected<std::vector<engine::AttachmentKey>> read_valid_attachments(const json& list,
                                                                    const std::string& where) {
    if (!list.is_array()) return type_error(where, "an array");
    std::vector<engine::AttachmentKey> keys;
    for (const auto& a : list) {
        if (!a.is_object() || !a.contains("containerID") || !a["containerID"].is_string() ||
            !a.contains("ifname") || !a["ifname"].is_string()) {
            return type_error(where + "[]", "an object with string containerID and ifname");
        }
        keys.push_back({a["containerID"].get<std::string>(), a["ifname"].get<std::string>()});
    }
    return keys;
}

}  // namespace shmipam::ipam
