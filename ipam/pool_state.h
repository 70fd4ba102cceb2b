// Where pool mode keeps each pool's state, and the engine config that opens it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/state/network_config.h"
#include "ipam/request.h"
#include "pools/catalog.h"
#include "pools/selection.h"

namespace shmipam::ipam {

// The state directory name of a candidate: "ippool_<name>" or "subnet_<name>" (Kubernetes
// names have no '_', so the two never meet).
std::string state_name(const pools::Candidate& c);
// The state directory name of the SpiderIPPool `pool` ("ippool_<pool>").
std::string pool_state_name(const std::string& pool);
// Where the arenas of the SpiderIPPool `pool` are under the network's runDir.
std::string pool_state_dir(const std::string& run_dir, const std::string& pool);
// The pool or subnet name of a state directory name (what state_name made it from).
std::string object_name_of_state(const std::string& state);

// Every pool state this node has (the journal directories under <dataDir>/_pools), by name.
// `likely`: the states the caller expects (an ADD's candidates). When those of them that exist
// are all the directory's subdirectories (its link count is 2 + their number, as ext4, xfs and
// tmpfs keep it), they are the answer without listing the directory: an ADD's common case, one
// pool per node, in two stats instead of four system calls. Any other link count (btrfs keeps
// 1 for every directory) lists it.
std::vector<std::string> pool_states(const Request& r, const std::vector<std::string>& likely = {});

// Makes `cfg` allocate from `allocatable` of a pool or subnet (its ranges and index size).
void allocate_from(engine::NetworkConfig& cfg, const engine::Cidr& subnet,
                   const std::optional<engine::IpAddress>& gateway,
                   const pools::IpSet& allocatable);

// The config that allocates from `allocatable` of the pool or subnet behind `state`.
std::unique_ptr<engine::NetworkConfig> allocating_config(
    const Request& r, const std::string& state, const engine::Cidr& subnet,
    const std::optional<engine::IpAddress>& gateway, const pools::IpSet& allocatable);

// The config that reads or releases what a state holds (DEL, CHECK, GC, a repeated ADD): its
// range is the object's whole subnet when the catalog still has it (so answers carry the right
// prefix and gateway), or every address of both families when the object is gone.
std::unique_ptr<engine::NetworkConfig> reading_config(const Request& r, const std::string& state,
                                                      const pools::Catalog& catalog);

// The pool or subnet behind a state, while the catalog has it: its gateway and routes are what
// the state's addresses answer with.
const pools::AddressSpec* object_of(const std::string& state, const pools::Catalog& catalog);

// A 48-bit tag of the network name, never 0 (format.h, Entry::network_tag).
uint64_t network_tag(const std::string& network_name);

}  // namespace shmipam::ipam
