#include "ipam/config_fields.h"

#include <cctype>
#include <cmath>
#include <cstdio>

namespace shmipam::ipam::config_fields {

// The longest network name: CNI's reference library refuses longer ones.
constexpr size_t kMaxNetworkNameBytes = 127;

bool matches_cni_pattern(const std::string& s) {
    if (s.empty() || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
    for (unsigned char c : s) {
        if (!std::isalnum(c) && c != '_' && c != '.' && c != '-') return false;
    }
    return true;
}

Status validate_network_name(const std::string& name) {
    if (name.empty()) return make_error(Code::kInvalidConfig, "missing network name");
    if (!matches_cni_pattern(name)) {
        return make_error(Code::kInvalidConfig, "invalid characters found in network name", name);
    }
    if (name.size() > kMaxNetworkNameBytes) {
        return make_error(Code::kInvalidConfig, "network name is too long", name);
    }
    return Ok{};
}

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

}  // namespace shmipam::ipam::config_fields
