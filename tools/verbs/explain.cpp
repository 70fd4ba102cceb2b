// shmipamctl explain: what pool mode would do for a pod, without creating it: the rule that
// applies, each family's candidates, which filter removed which pool and why, the order they
// would be tried in. Reads the pools directory itself (never a snapshot) and no state.
#include "tools/render/explain.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "ipam/config.h"
#include "pools/pool_dir.h"
#include "pools/selection.h"
#include "tools/render/json.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

using nlohmann::json;

namespace {

// The pod's facts and the config's pool fields (or config_file, a network config file).
struct ExplainOptions {
    std::string config_file, pools_dir, namespace_ = "default", pod, node, ifname = "eth0";
    std::vector<std::string> annotations, labels, default_v4, default_v6;
    bool clean_gateway = false;
    std::string multus_namespace, multus_cluster_network;
};

// The pool fields of a CNI network config file, read as the plugin reads them (ipam/config.h),
// and the pod's annotations and labels when the file carries them as a runtime passes them. What
// the command line gives wins: --annotation and --label come after, the rest are filled only
// where not given.
Status read_config(const std::string& path, ExplainOptions& e) {
    auto text = read_input(path);
    if (!text) return text.error();
    auto doc = ipam::network_config_of(*text, path);
    if (!doc) return doc.error();
    // A --node given stands for the config's node name; without one, a cluster-mode config
    // names its node as the plugin finds it (ipam.nodeName, else the node-name file).
    auto settings = ipam::read_network_settings(*doc, {"", e.node});
    if (!settings) {
        Error err = settings.error();
        err.msg = path + ": " + err.msg;
        return err;
    }
    auto pod = ipam::read_pod_metadata(*doc);
    if (!pod) return pod.error();
    // Before those of the command line, which come later and so win.
    std::vector<std::string> annotations, labels;
    for (const auto& [k, v] : pod->annotations) annotations.push_back(k + "=" + v);
    for (const auto& [k, v] : pod->labels) labels.push_back(k + "=" + v);
    e.annotations.insert(e.annotations.begin(), annotations.begin(), annotations.end());
    e.labels.insert(e.labels.begin(), labels.begin(), labels.end());
    // A config of ranges mode gives no pool fields: --pools-dir and the rest must.
    if (!settings->pools) {
        if (!e.pools_dir.empty()) return Ok{};
        return make_error(Code::kInvalidConfig,
                          path + " is not pool mode (no ipam.poolsDir): give --pools-dir");
    }
    const ipam::PoolMode& pm = *settings->pools;
    const pools::PoolConfig& c = pm.config;
    if (e.pools_dir.empty()) e.pools_dir = pm.pools_dir;
    if (e.node.empty() && pm.node_name_from_config) e.node = pm.node_name;
    if (e.multus_namespace.empty()) e.multus_namespace = c.multus_namespace;
    if (e.multus_cluster_network.empty()) e.multus_cluster_network = c.multus_cluster_network;
    if (e.default_v4.empty()) e.default_v4 = c.default_ipv4_ippool;
    if (e.default_v6.empty()) e.default_v6 = c.default_ipv6_ippool;
    e.clean_gateway = e.clean_gateway || c.clean_gateway;
    return Ok{};
}

Status split_pairs(const std::vector<std::string>& in, pools::Labels& out, const char* what) {
    for (const auto& kv : in) {
        const size_t eq = kv.find('=');
        if (eq == std::string::npos || eq == 0) {
            return make_error(Code::kInvalidConfig,
                              std::string(what) + " \"" + kv + "\" is not KEY=VALUE");
        }
        out[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    return Ok{};
}

// Reads common.json alone: explain reads the pools directory, never a run directory.
int cmd_explain(const CommonOptions& common, const ExplainOptions& o) {
    ExplainOptions e = o;
    if (!e.config_file.empty()) {
        if (auto st = read_config(e.config_file, e); !st) return cannot_read(st.error());
    }
    if (e.pools_dir.empty()) return cannot_read("explain needs --pools-dir or --config");
    auto catalog = pools::load_pools_dir(e.pools_dir);
    if (!catalog) return cannot_read(catalog.error());
    pools::PodFacts pod;
    pod.namespace_ = e.namespace_;
    pod.name = e.pod;
    pod.node_name = e.node;
    pod.ifname = e.ifname;
    if (auto st = split_pairs(e.annotations, pod.annotations, "--annotation"); !st)
        return cannot_read(st.error());
    if (auto st = split_pairs(e.labels, pod.labels, "--label"); !st) return cannot_read(st.error());
    pools::PoolConfig cfg;
    cfg.default_ipv4_ippool = e.default_v4;
    cfg.default_ipv6_ippool = e.default_v6;
    cfg.clean_gateway = e.clean_gateway;
    if (!e.multus_namespace.empty()) cfg.multus_namespace = e.multus_namespace;
    cfg.multus_cluster_network = e.multus_cluster_network;
    const pools::Selection s = pools::select_pools(*catalog, pod, cfg);
    std::cout << (common.json ? json_text(explain_json(s, *catalog)) : explain_text(s, *catalog));
    return s.error ? kExitViolations : kExitClean;
}

}  // namespace

void register_explain(CLI::App& app, CommonOptions& common, int& exit_code) {
    auto* verb = app.add_subcommand(
        "explain",
        "pool mode: which pools a pod would get its addresses from and why, without creating "
        "it (exit 1 when an ADD would fail)");
    auto o = std::make_shared<ExplainOptions>();
    verb->add_option("--config", o->config_file,
                     "a CNI network config file: its poolsDir and pool fields, and the pod "
                     "annotations and labels it carries");
    verb->add_option("--pools-dir", o->pools_dir, "the pools directory");
    verb->add_option("--namespace", o->namespace_, "the pod's namespace")->capture_default_str();
    verb->add_option("--pod", o->pod, "the pod's name");
    verb->add_option("--node", o->node, "the node the pod runs on");
    verb->add_option("--ifname", o->ifname, "the interface being added")->capture_default_str();
    verb->add_option("--annotation", o->annotations, "a pod annotation KEY=VALUE (repeat)");
    verb->add_option("--label", o->labels, "a pod label KEY=VALUE (repeat)");
    verb->add_option("--default-v4", o->default_v4, "default_ipv4_ippool (repeat)");
    verb->add_option("--default-v6", o->default_v6, "default_ipv6_ippool (repeat)");
    verb->add_flag("--clean-gateway", o->clean_gateway, "clean_gateway");
    verb->add_option("--multus-namespace", o->multus_namespace, "multusNamespace");
    verb->add_option("--multus-cluster-network", o->multus_cluster_network, "multusClusterNetwork");
    add_json_flag(*verb, common);
    verb->callback([&common, o, &exit_code] { exit_code = cmd_explain(common, *o); });
}

}  // namespace shmipam::tools
