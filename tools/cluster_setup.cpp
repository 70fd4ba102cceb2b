#include "tools/cluster_setup.h"

#include <sstream>

#include "cluster/etcd_config.h"
#include "cluster/key_schema.h"
#include "cluster/node_name.h"
#include "cluster/store_values.h"
#include "ipam/config.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

using nlohmann::json;

Expected<ClusterSetup> read_setup(const std::string& config, const std::string& node,
                                  const std::string& run_dir) {
    auto config_text = read_input(config);
    if (!config_text) return config_text.error();
    // The plugin's own reader: the same fields, defaults and refusals as its ADDs (the node's
    // name never the host name, and one no Node object can have refused: ipam/pool_config.h).
    auto settings = ipam::read_network_text(*config_text, config, {run_dir, node});
    if (!settings) return settings.error();
    if (!settings->pools || !settings->pools->cluster) {
        return make_error(Code::kInvalidConfig,
                          config +
                              " is not a network config whose ipam section has \"etcd\" "
                              "(docs/cluster.md)");
    }
    const ipam::PoolMode& pools = *settings->pools;
    ClusterSetup s;
    s.etcd = pools.cluster->etcd;
    s.node = pools.node_name;
    s.data_dir = settings->network.data_dir;
    s.run_dir = settings->network.run_dir;
    s.pools_dir = pools.pools_dir;
    s.block_min_age_s = pools.cluster->block_min_age_s;
    s.fixed_pools = pools.cluster->fixed_pools;
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
