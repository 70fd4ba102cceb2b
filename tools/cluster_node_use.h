// What this node's pool states say of a cluster pool (cluster/node_side.h), read from the
// node's runDir and dataDir: how many addresses of each block are in use, when one was last
// released, and which fixed claims its sandboxes use. The node pass judges a block idle by it,
// and `cluster ls` shows it. A cluster pool's name is served on the node from a SpiderIPPool's
// state (<runDir>/_pools/ippool_<name>) or from a subnet annotation's (subnet_<name>): both are
// read.
#pragma once

#include <string>
#include <vector>

#include "cluster/node_side.h"

namespace shmipam::tools {

class NodeStates final : public cluster::NodeSide {
  public:
    NodeStates(std::string run_dir, std::string data_dir)
        : run_dir_(std::move(run_dir)), data_dir_(std::move(data_dir)) {}

    cluster::PoolUse pool_use(const std::string& pool, int block_prefix) override;
    bool has_pool_state(const std::string& pool) override;
    std::vector<engine::ClaimView> claims_held(const std::string& pool) override;

  private:
    std::string run_dir_, data_dir_;
};

}  // namespace shmipam::tools
