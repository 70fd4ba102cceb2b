#include "ipam/pool_config.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cluster/etcd_config.h"
#include "cluster/node_name.h"
#include "ipam/config_fields.h"

namespace shmipam::ipam {

using nlohmann::json;
using namespace config_fields;  // NOLINT(google-build-using-namespace): the field readers

namespace {

Expected<std::vector<std::string>> name_list(const json& ipam, const char* key) {
    std::vector<std::string> out;
    auto it = ipam.find(key);
    if (it == ipam.end() || it->is_null()) return out;
    if (!it->is_array()) return type_error(std::string("ipam.") + key, "a list of pool names");
    for (const auto& v : *it) {
        if (!v.is_string()) return type_error(std::string("ipam.") + key, "a list of pool names");
        out.push_back(v.get<std::string>());
    }
    return out;
}

// Pool mode: poolsDir and Spiderpool's config fields. `ranges` (or a legacy subnet, or
// runtimeConfig.ipRanges) beside poolsDir is an error: one config, one mode.
Expected<std::optional<PoolMode>> parse_pool_mode_fields(const json& doc, const json& ipam) {
    auto dir = opt_string(ipam, "poolsDir", "ipam.");
    if (!dir) return dir.error();
    if (dir->empty()) return std::optional<PoolMode>{};
    const bool has_ranges = (ipam.contains("ranges") && !ipam["ranges"].is_null()) ||
                            (ipam.contains("subnet") && !ipam["subnet"].is_null());
    bool has_ip_ranges = false;
    if (auto rc = doc.find("runtimeConfig"); rc != doc.end() && rc->is_object()) {
        has_ip_ranges = rc->contains("ipRanges") && !(*rc)["ipRanges"].is_null();
    }
    if (has_ranges || has_ip_ranges) {
        return make_error(Code::kInvalidConfig,
                          "ipam.poolsDir and ranges cannot both be set: pools select the "
                          "addresses in pool mode (remove ranges/subnet, or poolsDir)");
    }
    PoolMode pm;
    pm.pools_dir = *dir;
    auto v4 = name_list(ipam, "default_ipv4_ippool");
    if (!v4) return v4.error();
    auto v6 = name_list(ipam, "default_ipv6_ippool");
    if (!v6) return v6.error();
    pm.config.default_ipv4_ippool = *v4;
    pm.config.default_ipv6_ippool = *v6;
    if (auto it = ipam.find("clean_gateway"); it != ipam.end() && !it->is_null()) {
        if (!it->is_boolean()) return type_error("ipam.clean_gateway", "a boolean");
        pm.config.clean_gateway = it->get<bool>();
    }
    auto multus_ns = opt_string(ipam, "multusNamespace", "ipam.");
    if (!multus_ns) return multus_ns.error();
    if (!multus_ns->empty()) pm.config.multus_namespace = *multus_ns;
    auto cluster_net = opt_string(ipam, "multusClusterNetwork", "ipam.");
    if (!cluster_net) return cluster_net.error();
    pm.config.multus_cluster_network = *cluster_net;
    auto node = opt_string(ipam, "nodeName", "ipam.");
    if (!node) return node.error();
    pm.node_name = *node;
    pm.node_name_from_config = !node->empty();
    auto node_file = opt_string(ipam, "nodeNameFile", "ipam.");
    if (!node_file) return node_file.error();
    pm.node_name_file = node_file->empty() ? kDefaultNodeNameFile : *node_file;
    if (auto it = ipam.find("etcd"); it != ipam.end() && !it->is_null()) {
        // Checked here, so that a mistake is the plugin's clear error, not the helper's.
        auto etcd = cluster::etcd_config_from_json(*it);
        if (!etcd) return etcd.error();
        ClusterMode cm;
        cm.etcd = *it;
        cm.budget_ms = etcd->budget_ms;
        if (auto m = ipam.find("maxBlocksPerNode"); m != ipam.end() && !m->is_null()) {
            if (!m->is_number_integer() || m->get<int64_t>() < 1) {
                return make_error(Code::kInvalidConfig,
                                  "ipam.maxBlocksPerNode must be a positive integer");
            }
            cm.max_blocks = m->get<uint64_t>();
        }
        if (auto a = ipam.find("claimAheadPercent"); a != ipam.end() && !a->is_null()) {
            if (!a->is_number_integer() || a->get<int64_t>() < 0 || a->get<int64_t>() > 99) {
                return make_error(Code::kInvalidConfig,
                                  "ipam.claimAheadPercent must be an integer from 0 (off) to 99");
            }
            cm.claim_ahead_percent = a->get<uint64_t>();
        }
        if (auto a = ipam.find("blockMinAgeS"); a != ipam.end() && !a->is_null()) {
            if (!a->is_number_integer() || a->get<int64_t>() < 0) {
                return make_error(Code::kInvalidConfig,
                                  "ipam.blockMinAgeS must be a non-negative integer (seconds)");
            }
            cm.block_min_age_s = a->get<uint64_t>();
        }
        if (auto f = ipam.find("fixedAddressPools"); f != ipam.end() && !f->is_null()) {
            if (!f->is_array()) return type_error("ipam.fixedAddressPools", "a list of pool names");
            for (const auto& n : *f) {
                if (!n.is_string()) {
                    return type_error("ipam.fixedAddressPools[]", "a pool name (string)");
                }
                cm.fixed_pools.insert(n.get<std::string>());
            }
        }
        auto helper = opt_string(ipam, "clusterHelper", "ipam.");
        if (!helper) return helper.error();
        cm.helper = *helper;
        pm.cluster = std::move(cm);
    }
    const bool cluster = pm.cluster.has_value();
    if (pm.node_name.empty() && cluster) {
        // The name the store and `cluster gc` know the node by must be the Node object's: a
        // host name differs from it in case or domain, and a gc would take a live node's blocks.
        auto named = read_node_name_file(pm.node_name_file);
        if (!named) return named.error();
        pm.node_name = *named;
        pm.node_name_from_config = true;
    }
    if (cluster) {
        // Compared byte for byte with the Node list a gc is given: a name no Node object can
        // have would have this live node's blocks taken.
        if (auto why = cluster::node_name_problem(pm.node_name); !why.empty()) {
            return make_error(Code::kInvalidConfig,
                              "the node's name (ipam.nodeName, else ipam.nodeNameFile): " + why);
        }
    } else if (pm.node_name.empty()) {
        // Pool mode on one node: the name only selects by node affinity.
        char host[256] = {};
        if (::gethostname(host, sizeof host - 1) == 0) pm.node_name = host;
    }
    return std::optional<PoolMode>{std::move(pm)};
}

}  // namespace

Expected<std::string> read_node_name_file(const std::string& path) {
    const std::string how =
        "cluster mode needs this node's name as its Node object has it: set ipam.nodeName in the "
        "network config, or write it to " +
        path +
        " (ipam.nodeNameFile; the DaemonSet's install container writes spec.nodeName there: "
        "shmipamctl install --node-name)";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return make_error(Code::kInvalidConfig, how, path + ": " + std::strerror(errno));
    }
    char buf[kMaxNodeNameBytes + 2];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    ::close(fd);
    std::string name(buf, n > 0 ? size_t(n) : 0);
    name = name.substr(0, name.find('\n'));
    while (!name.empty() && (name.back() == ' ' || name.back() == '\r' || name.back() == '\t')) {
        name.pop_back();
    }
    if (name.empty() || name.size() > kMaxNodeNameBytes ||
        name.find_first_of(" /\t") != std::string::npos) {
        return make_error(Code::kInvalidConfig, how,
                          path + " holds no node name (one line, a Kubernetes node name)");
    }
    return name;
}

Expected<std::optional<PoolMode>> parse_pool_mode(const json& doc, const json& ipam) {
    auto pm = parse_pool_mode_fields(doc, ipam);
    if (!pm) return pm.error();
    if (!*pm && ipam.contains("etcd") && !ipam["etcd"].is_null()) {
        return make_error(Code::kInvalidConfig,
                          "ipam.etcd (cluster mode) needs poolsDir: the cluster shares pools "
                          "(docs/cluster.md)");
    }
    return pm;
}

void apply_block_size_defaults(const json& ipam, const std::optional<PoolMode>& pools,
                               engine::NetworkConfig& network) {
    if (pools && pools->cluster) apply_cluster_block_sizes(ipam, network);
}

void apply_cluster_block_sizes(const json& ipam, engine::NetworkConfig& network) {
    if (!ipam.contains("blockSize")) network.block_prefix_v4 = 26;
    if (!ipam.contains("blockSizeV6")) network.block_prefix_v6 = 122;
}

}  // namespace shmipam::ipam
