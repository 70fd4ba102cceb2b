// A node whose pool states say what a unit test sets (cluster/node_side.h): what the node pass
// and recovery are handed instead of the real states of tools/cluster_node_use.h.
#pragma once

#include <string>
#include <vector>

#include "cluster/node_side.h"

namespace shmipam::testing {

class MadeUpNode final : public cluster::NodeSide {
  public:
    cluster::PoolUse use;                   // of every pool
    std::vector<engine::ClaimView> claims;  // of every pool

    cluster::PoolUse pool_use(const std::string&, int) override { return use; }
    bool has_pool_state(const std::string&) override {
        return use.found != cluster::PoolUse::Found::kNone;
    }
    std::vector<engine::ClaimView> claims_held(const std::string&) override { return claims; }
};

}  // namespace shmipam::testing
