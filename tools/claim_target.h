// Where an operator's fixed claim goes (shmipamctl claims create and claims import): the
// network config the pod's ADD reads, turned into the state its claim lives in and the engine
// config that opens (or creates) that state. The claim's key and policy are spelled exactly as
// the plugin's (pools/sticky.h, ipam/fixed_claim.h), so that the pod's next ADD finds it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "engine/addr/ip_address.h"
#include "engine/state/network_config.h"
#include "pools/catalog.h"

namespace shmipam::tools {

// The parts of one CNI network config file an operator's claim needs.
struct ClaimNetwork {
    std::string path;               // the file, for messages
    engine::NetworkConfig network;  // name, runDir, dataDir, knobs; ranges mode: the ranges
    std::string pools_dir;          // pool mode (ipam.poolsDir)
    bool cluster = false;           // ipam.etcd: cluster mode
    std::shared_ptr<pools::Catalog> catalog;  // pool mode: the pools directory as it is now
};

// Reads `path` (a .conf, a .conflist, or one plugin's object) with the plugin's reader
// (ipam/config.h): runDir defaults to `default_run_dir` (the tool's --run-dir); a field of the
// wrong type or value is refused, named, as the plugin refuses it.
Expected<ClaimNetwork> read_claim_network(const std::string& path,
                                          const std::string& default_run_dir);

// The state a claim on `address` lives in: ranges mode the network's own (named as the network),
// pool mode the state of the pool whose allocatable addresses hold it (named "pool/<name>", as
// shmipamctl names pool states). Refused, naming why, when no range or pool holds it, or
// when `want_state` is given and is not that state.
struct ClaimTarget {
    std::string state;  // "<network>" or "pool/<pool>"
    std::unique_ptr<engine::NetworkConfig> cfg;
    uint64_t network_tag = 0;  // pool mode: which network's claim (format.h, Entry::network_tag)
};
Expected<ClaimTarget> claim_target(const ClaimNetwork& net, const engine::IpAddress& address,
                                   const std::string& want_state = "");

// A pod (or VM) as an operator names it: "<namespace>/<name>", each part a Kubernetes name (no
// ':' and no '/', at most 253 bytes).
struct PodName {
    std::string namespace_, name;
};
Expected<PodName> parse_pod_name(const std::string& text);

// The claim key the plugin builds: "sts:<ns>/<pod>/<ifname>", or "vm:<ns>/<vm>/<ifname>".
std::string claim_key(const PodName& who, const std::string& ifname, bool vm);

// A reclaim policy as an operator writes it: "never", "statefulset" (while its StatefulSet
// wants it), "vm" (while its VM exists: the same engine policy, the owner told by the claim's
// key), or the policy annotation's syntax ("0", "24", "90m", ...). What the engine keeps
// (format.h, ClaimFields::keep_idle).
Expected<uint64_t> parse_policy(const std::string& text);
// The text parse_policy reads back as `keep_idle` (what claims export writes).
// `vm`: the claim is a VM's (its key "vm:..."), whose owner policy reads "vm".
std::string policy_word(uint64_t keep_idle, bool vm = false);

}  // namespace shmipam::tools
