// What this node's pool states say of a cluster pool's blocks: how many addresses of each are in
// use, and when one was last released. The node pass judges a block idle by it, and `cluster ls`
// shows it. A cluster pool's name is served on the node from a SpiderIPPool's state
// (<runDir>/_pools/ippool_<name>) or from a subnet annotation's (subnet_<name>): both are read.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shmipam::tools {

struct BlockUse {
    uint64_t in_use = 0;               // addresses neither free nor cooling
    uint64_t last_release_unix_s = 0;  // when an address of it was last released (0: never)
};

struct PoolUse {
    // What the node has of the pool:
    //  kArenas:  a state in runDir, read: `blocks` is the truth of this node;
    //  kUnknown: no state readable in runDir while the pool's journal is in dataDir (after a
    //            reboot, before the pool's first ADD rebuilds the state; or the runDir not where
    //            the config says, as in a container missing its mount) or a state that cannot
    //            be read: what is in use cannot be told, so no block counts as idle;
    //  kNone:    no state and no journal: the node never allocated from the pool (or its files
    //            were removed), and nothing on it can hold an address of the pool.
    enum class Found { kArenas, kUnknown, kNone } found = Found::kNone;
    std::vector<std::string> arenas;         // shmipamctl's names of them: pool/<n>, subnet/<n>
    std::map<std::string, BlockUse> blocks;  // by block CIDR (of the cluster's block prefix)
    std::string why;                         // kUnknown: what was found
};

PoolUse pool_use(const std::string& run_dir, const std::string& data_dir, const std::string& pool,
                 int block_prefix);

// Whether the node has any state of the pool now, arena or journal (an ADD made one).
bool has_pool_state(const std::string& run_dir, const std::string& data_dir,
                    const std::string& pool);

}  // namespace shmipam::tools
