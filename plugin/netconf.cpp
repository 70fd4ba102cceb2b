#include "plugin/netconf.h"

#include <cmath>
#include <cstdio>
#include <tuple>

#include "plugin/cni_env.h"

namespace shmipam::cni {

using nlohmann::json;

namespace {

Error type_error(const std::string& field, const char* want) {
    return make_error(Code::kDecode,
                      "cannot decode network config: \"" + field + "\" must be " + want);
}

// Reads an optional string field; code 6 when present with another type.
Expected<std::string> opt_string(const json& obj, const char* key, const std::string& where) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return std::string();
    if (!it->is_string()) return type_error(where + key, "a string");
    return it->get<std::string>();
}

Expected<engine::RangeSpec> parse_range_spec(const json& j, const std::string& where) {
    if (!j.is_object()) return type_error(where, "an object");
    engine::RangeSpec r;
    struct Field {
        const char* key;
        std::string* into;
    } fields[] = {{"subnet", &r.subnet},
                  {"rangeStart", &r.range_start},
                  {"rangeEnd", &r.range_end},
                  {"gateway", &r.gateway}};
    for (auto& f : fields) {
        auto v = opt_string(j, f.key, where + ".");
        if (!v) return v.error();
        *f.into = *v;
    }
    return r;
}

Expected<std::vector<engine::RangeSet>> parse_range_sets(const json& j, const std::string& where) {
    if (!j.is_array()) return type_error(where, "an array of range sets");
    std::vector<engine::RangeSet> sets;
    for (size_t i = 0; i < j.size(); ++i) {
        const std::string w = where + "[" + std::to_string(i) + "]";
        if (!j[i].is_array()) return type_error(w, "an array of ranges");
        std::vector<engine::RangeSpec> specs;
        for (size_t k = 0; k < j[i].size(); ++k) {
            auto spec = parse_range_spec(j[i][k], w + "[" + std::to_string(k) + "]");
            if (!spec) return spec.error();
            specs.push_back(*spec);
        }
        auto set = engine::make_range_set(specs);
        if (!set) {
            return make_error(Code::kInvalidConfig,
                              "invalid range set " + std::to_string(i) + ": " + set.error().msg);
        }
        sets.push_back(*set);
    }
    return sets;
}

// A list of address strings (args.cni.ips, runtimeConfig.ips).
Expected<std::vector<std::string>> parse_ip_list(const json& j, const std::string& where) {
    if (!j.is_array()) return type_error(where, "an array of strings");
    std::vector<std::string> out;
    for (const auto& v : j) {
        if (!v.is_string()) return type_error(where, "an array of strings");
        out.push_back(v.get<std::string>());
    }
    return out;
}

// reuseDelay: seconds as a number, or a duration string ("500ms", "30s", "2m", "1h").
Expected<uint64_t> parse_delay_ms(const json& j) {
    if (j.is_number()) {
        const double s = j.get<double>();
        if (!(s >= 0) || s > 86400.0 * 365) {
            return make_error(Code::kInvalidConfig, "reuseDelay must be between 0 and a year");
        }
        return uint64_t(std::llround(s * 1000));
    }
    if (!j.is_string()) return type_error("ipam.reuseDelay", "a number of seconds or a duration");
    const std::string s = j.get<std::string>();
    double v = 0;
    char unit[4] = {};
    int n = std::sscanf(s.c_str(), "%lf%3s", &v, unit);
    const std::string u = n == 2 ? unit : "s";
    const double mult = u == "ms"  ? 1
                        : u == "s" ? 1000
                        : u == "m" ? 60000
                        : u == "h" ? 3600000
                                   : -1;
    if (n < 1 || mult < 0 || !(v >= 0)) {
        return make_error(Code::kInvalidConfig, "invalid reuseDelay \"" + s + "\"");
    }
    return uint64_t(std::llround(v * mult));
}

Expected<uint8_t> parse_block_size(const json& ipam, const char* key, int lo, int hi, uint8_t def) {
    auto it = ipam.find(key);
    if (it == ipam.end() || it->is_null()) return def;
    if (!it->is_number_integer()) return type_error(std::string("ipam.") + key, "an integer");
    const int v = it->get<int>();
    if (v < lo || v > hi) {
        return make_error(Code::kInvalidConfig, std::string(key) + " must be between /" +
                                                    std::to_string(lo) + " and /" +
                                                    std::to_string(hi));
    }
    return uint8_t(v);
}

}  // namespace

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

// The policy and durability knobs: reuseDelay, block sizes, durability and its backend,
// reclaimOnReboot, journalMaxSegments, bootIdFile.
Status parse_state_knobs(const json& ipam, engine::NetworkConfig& network) {
    if (auto it = ipam.find("reuseDelay"); it != ipam.end() && !it->is_null()) {
        auto d = parse_delay_ms(*it);
        if (!d) return d.error();
        network.reuse_delay_ms = *d;
    }
    auto b4 = parse_block_size(ipam, "blockSize", 16, 30, 24);
    if (!b4) return b4.error();
    // Blocks of at most 65,536 addresses (4 MiB of slots, fully allocated when first used).
    auto b6 = parse_block_size(ipam, "blockSizeV6", 112, 126, 120);
    if (!b6) return b6.error();
    network.block_prefix_v4 = *b4;
    network.block_prefix_v6 = *b6;

    // Durability of the journal.
    auto durability = opt_string(ipam, "durability", "ipam.");
    if (!durability) return durability.error();
    using D = engine::NetworkConfig::Durability;
    if (*durability == "fsync") {
        network.durability = D::kFsync;
    } else if (*durability == "none") {
        network.durability = D::kNone;
    } else if (!durability->empty() && *durability != "auto") {
        return make_error(
            Code::kInvalidConfig,
            "durability must be \"fsync\", \"none\" or \"auto\", not \"" + *durability + "\"");
    }
    auto backend = opt_string(ipam, "durabilityBackend", "ipam.");
    if (!backend) return backend.error();
    using B = engine::NetworkConfig::Backend;
    if (*backend == "fdatasync") {
        network.backend = B::kFdatasync;
    } else if (*backend == "io_uring") {
        network.backend = B::kIoUring;
    } else if (!backend->empty() && *backend != "auto") {
        return make_error(Code::kInvalidConfig,
                          "durabilityBackend must be \"fdatasync\", "
                          "\"io_uring\" or \"auto\", not \"" +
                              *backend + "\"");
    }
    if (auto it = ipam.find("reclaimOnReboot"); it != ipam.end() && !it->is_null()) {
        if (!it->is_boolean()) return type_error("ipam.reclaimOnReboot", "a boolean");
        network.reclaim_on_reboot = it->get<bool>();
    }
    if (auto it = ipam.find("journalMaxSegments"); it != ipam.end() && !it->is_null()) {
        if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 1'000'000) {
            return make_error(Code::kInvalidConfig,
                              "ipam.journalMaxSegments must be an integer from 1 to 1000000");
        }
        network.journal_max_segments = it->get<uint64_t>();
    }
    auto boot_id_file = opt_string(ipam, "bootIdFile", "ipam.");
    if (!boot_id_file) return boot_id_file.error();
    if (!boot_id_file->empty()) network.boot_id_path = *boot_id_file;
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
    if (auto st = parse_ranges(doc, ipam, runtime, nc); !st) return st.error();
    if (auto st = parse_state_knobs(ipam, nc.network); !st) return st.error();
    if (auto st = parse_routes(ipam, nc); !st) return st.error();
    if (auto st = parse_requested(doc, runtime, args, nc); !st) return st.error();
    if (auto p = doc.find("prevResult"); p != doc.end() && !p->is_null()) nc.prev_result = *p;
    if (auto st = parse_valid_attachments(doc, nc); !st) return st.error();
    return nc;
}

}  // namespace shmipam::cni
