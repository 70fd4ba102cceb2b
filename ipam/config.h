// The network config shmipam reads, in one place for the plugin and every tool: the network's
// name and its whole ipam section (the range sets, routes, the state's knobs, pool mode, cluster
// mode, the Kubernetes API), and what a runtime adds to it for one invocation (the pod's
// annotations and labels, GC's valid attachments). Strict as the plugin is: a field of the wrong
// type is refused with code 6 or 7 naming it and what it must be, a bad value with code 7;
// unknown fields are ignored, as every CNI plugin does. The defaults are named beside what they
// set (engine/state/network_config.h, ipam/pool_config.h, ipam/kubernetes_config.h).
//
// The plugin reads the config on its stdin (plugin/netconf.h adds the CNI version, the requested
// addresses and prevResult); shmipamctl reads the file the runtime reads: a .conf, or the
// shmipam plugin of a .conflist.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/ops/allocator.h"
#include "engine/state/network_config.h"
#include "ipam/kubernetes_config.h"
#include "ipam/pool_config.h"
#include "pools/pod_facts.h"

namespace shmipam::ipam {

// One network's settings, as its config names them.
struct NetworkSettings {
    // Its name, dataDir, runDir and the state's knobs; in ranges mode its range sets
    // (runtimeConfig.ipRanges, the legacy single range, then "ranges": host-local's order).
    engine::NetworkConfig network;
    std::string resolv_conf;                          // ipam.resolvConf
    nlohmann::json routes = nlohmann::json::array();  // ipam.routes, handed back as configured
    std::optional<PoolMode> pools;                    // ipam.poolsDir; with ipam.etcd, cluster mode
    bool statefulset_fixed_ip = false;                // ipam.statefulSetFixedIP (docs/fixed-ips.md)
    std::optional<KubernetesApi> kubernetes;          // ipam.kubernetes (docs/kubernetes.md)
};

// What a tool's command line says instead of the file.
struct SettingsOverrides {
    std::string run_dir;    // runDir when the config names none ("": the plugin's default)
    std::string node_name;  // stands for ipam.nodeName ("": the config's)
};

// One network's config object: its "name", "ipam" and, from a runtime, "runtimeConfig".
Expected<NetworkSettings> read_network_settings(const nlohmann::json& doc,
                                                const SettingsOverrides& overrides = {});

// The network config a file holds, as one network's object: a .conf's object; of a .conflist
// (a "plugins" list), the plugin whose ipam section is shmipam's ("type": "shmipam", else the
// only plugin with an ipam section), with the list's name and cniVersion. Code 6 for text that
// is no JSON object or holds no ipam section, naming `origin` (the file, for messages).
Expected<nlohmann::json> network_config_of(std::string_view text, const std::string& origin);

// network_config_of, then read_network_settings.
Expected<NetworkSettings> read_network_text(std::string_view text, const std::string& origin,
                                            const SettingsOverrides& overrides = {});

// The pod's metadata a runtime passes in the config: its annotations (containerd's
// runtimeConfig "io.kubernetes.cri.pod-annotations") and labels (args.cni.labels, a list of
// {key, value}: the CNI conventions; no Kubernetes runtime fills it).
struct PodMetadata {
    pools::Labels annotations, labels;
};
Expected<PodMetadata> read_pod_metadata(const nlohmann::json& doc);

// GC's attachments still valid: a list of {"containerID", "ifname"} (the config's
// "cni.dev/valid-attachments"); `where` names it in messages.
Expected<std::vector<engine::AttachmentKey>> read_valid_attachments(const nlohmann::json& list,
                                                                    const std::string& where);

}  // namespace shmipam::ipam
