#include "tools/cluster_setup.h"

#include <sstream>

#include "cluster/etcd_config.h"
#include "cluster/key_schema.h"
#include "cluster/node_name.h"
#include "cluster/store_values.h"
#include "ipam/pool_config.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

using nlohmann::json;

Expected<ClusterSetup> read_setup(const std::string& config, const std::string& node,
                                  const std::string& run_dir) {
    auto config_text = read_input(config);
    if (!config_text) return config_text.error();
    const json doc = json::parse(*config_text, nullptr, false);
    const json* ipam = nullptr;
    if (doc.is_object() && doc.contains("ipam") && doc["ipam"].is_object()) ipam = &doc["ipam"];
    if (doc.is_object() && doc.contains("plugins") && doc["plugins"].is_array()) {
        for (const auto& p : doc["plugins"]) {
            if (p.is_object() && p.contains("ipam") && p["ipam"].is_object() &&
                p["ipam"].contains("etcd")) {
                ipam = &p["ipam"];
            }
        }
    }
    if (ipam == nullptr || !ipam->contains("etcd")) {
        return make_error(Code::kInvalidConfig,
                          config +
                              " is not a network config whose ipam section has \"etcd\" "
                              "(docs/cluster.md)");
    }
    ClusterSetup s;
    s.etcd = (*ipam)["etcd"];
    const auto text = [&](const char* k, const std::string& dflt) {
        return ipam->contains(k) && (*ipam)[k].is_string() ? (*ipam)[k].get<std::string>() : dflt;
    };
    // The node's name as the plugin knows it: never the host name (ipam/pool_config.h).
    s.node = !node.empty() ? node : text("nodeName", "");
    if (s.node.empty()) {
        auto named = ipam::read_node_name_file(text("nodeNameFile", ipam::kDefaultNodeNameFile));
        if (!named) return named.error();
        s.node = *named;
    }
    if (auto why = cluster::node_name_problem(s.node); !why.empty()) {
        return make_error(Code::kInvalidConfig, "the node's name: " + why);
    }
    s.data_dir = text("dataDir", "/var/lib/cni/networks");
    s.pools_dir = text("poolsDir", "");
    s.run_dir = text("runDir", run_dir);
    if (auto a = ipam->find("blockMinAgeS"); a != ipam->end() && a->is_number_unsigned()) {
        s.block_min_age_s = a->get<uint64_t>();
    }
    if (auto f = ipam->find("fixedAddressPools"); f != ipam->end() && f->is_array()) {
        for (const auto& n : *f) {
            if (n.is_string()) s.fixed_pools.insert(n.get<std::string>());
        }
    }
    return s;
}

Expected<StoreView> read_store(const ClusterSetup& setup, cluster::Guards guards) {
    auto cfg = cluster::etcd_config_from_json(setup.etcd);
    if (!cfg) return cfg.error();
    StoreView v;
    v.client = std::make_unique<cluster::EtcdClient>(*cfg);
    const std::string prefix = cluster::etcd_prefix(setup.etcd);
    guards.stamp_schema = false;  // a reader: an empty store reads as empty
    auto store = cluster::GuardedStore::open(*v.client, prefix, setup.state_dir(), guards);
    if (!store) return store.error();
    v.store = std::make_unique<cluster::GuardedStore>(std::move(*store));
    // One read of every pool's keys: the blocks and the values checked come from it.
    auto kvs = v.store->get_prefix(cluster::keys::pools(prefix));
    if (!kvs) return kvs.error();
    v.blocks = cluster::BlockStore::blocks_by_pool(prefix, *kvs);
    // Every value that is not what its key says, whatever its kind.
    auto unreadable = cluster::unreadable_values(*v.store, prefix, *kvs);
    if (!unreadable) return unreadable.error();
    v.unreadable = std::move(*unreadable);
    return v;
}

// Node names from a file (or - for stdin): a JSON list of names, a Kubernetes NodeList
// (`kubectl get nodes -o json`), or one name per line. Anything else is refused, never read
// as names: a gc with the wrong list releases the blocks of nodes that run.
Expected<std::set<std::string>> read_live_nodes(const std::string& path) {
    auto input = read_input(path);
    if (!input) return input.error();
    const std::string& text = *input;
    std::set<std::string> out;
    const size_t start = text.find_first_not_of(" \t\r\n");
    const bool looks_json =
        start != std::string::npos && (text[start] == '{' || text[start] == '[');
    const auto bad = [](const std::string& why) {
        return make_error(Code::kDecode,
                          "--live-nodes: " + why +
                              " (give a JSON list of names, `kubectl get nodes -o json`, or one "
                              "name per line)");
    };
    if (looks_json) {
        const json doc = json::parse(text, nullptr, false);
        if (doc.is_discarded()) return bad("not valid JSON (cut short?)");
        if (doc.is_array()) {
            for (const auto& n : doc) {
                if (!n.is_string()) return bad("a list holding something other than names");
                out.insert(n.get<std::string>());
            }
        } else if (doc.contains("items") && doc["items"].is_array()) {
            for (const auto& n : doc["items"]) {
                if (!n.is_object() || !n.contains("metadata") || !n["metadata"].is_object() ||
                    !n["metadata"].contains("name") || !n["metadata"]["name"].is_string()) {
                    return bad("an item without metadata.name");
                }
                out.insert(n["metadata"]["name"].get<std::string>());
            }
        } else {
            return bad("a JSON object that is not a list of Nodes");
        }
    } else {
        std::istringstream lines(text);
        for (std::string l; std::getline(lines, l);) {
            while (!l.empty() && (l.back() == ' ' || l.back() == '\r' || l.back() == '\t')) {
                l.pop_back();
            }
            if (!l.empty()) out.insert(l);
        }
    }
    for (const auto& n : out) {
        if (!cluster::is_node_name(n)) return bad("\"" + n + "\" is not a node name");
    }
    return out;
}

}  // namespace shmipam::tools
