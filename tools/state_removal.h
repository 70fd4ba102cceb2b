// Removing a pool state whose pool is gone (shmipamctl states remove), crash-safe: its journal
// directory (<dataDir>/_pools/<state>, the durable truth a rebuild reads) and its arena directory
// (<runDir>/_pools/<state>) are each renamed to a ".removing." name first, the journal's first,
// each rename made durable by an fsync of its parent; only then are their files deleted. A
// process killed at any step leaves the state whole (nothing renamed) or removed (its journal
// renamed: no invocation lists it again, since pool states are found by listing <dataDir>/_pools
// for "ippool_" and "subnet_" names, ipam/pool_state.h), and finish_removals completes what is
// left, as every later `shmipamctl states` does first.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace shmipam::tools {

// Where pool mode keeps a node's pool states: <runDir>/_pools and <dataDir>/_pools.
struct PoolStateDirs {
    std::string arenas;    // <runDir>/_pools
    std::string journals;  // <dataDir>/_pools
};

// The prefix a state being removed is renamed with: a leading '.' that no state name has, so
// neither the plugin (ipam/pool_state.h, pool_states) nor shmipamctl ever opens it.
inline constexpr const char* kRemovingPrefix = ".removing.";

// Every state directory ("ippool_<name>", "subnet_<name>") in either directory, sorted.
std::vector<std::string> pool_state_names(const PoolStateDirs& dirs);

// Completes every removal a killed run left: an arena whose journal is renamed is renamed too
// (unless a journal of that name exists again: a pool added back whose ADD used the arena since;
// that live state is never touched), then every ".removing." directory is deleted. The states
// it finished, by name.
Expected<std::vector<std::string>> finish_removals(const PoolStateDirs& dirs);

// Removes the state `state` ("ippool_<name>"): renames as above, then deletes.
Status remove_pool_state(const PoolStateDirs& dirs, const std::string& state);

}  // namespace shmipam::tools
