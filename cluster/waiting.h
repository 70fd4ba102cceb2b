// No node shut out while addresses are free (docs/cluster.md, "No node shut out"): without
// per-address borrowing (which would cost every ADD an etcd call), a node that finds no block
// left records that it waits, and a node whose block has had no address in use records that the
// block is idle; the node pass of a node holding an idle block older than blockMinAgeS gives it
// back, even its last, while some node waits. Keys (cluster/key_schema.h):
//
//   <prefix>/v1/pools/<pool>/waiting/<node>          {"lastUnixS": <when it last found none>}
//   <prefix>/v1/pools/<pool>/idle/<address>-<len>    {"node": "<owner>", "sinceUnixS": <s>}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/etcd_client.h"
#include "engine/addr/ip_address.h"

namespace shmipam::cluster {

// A node that last found no block this long ago still waits: the kubelet retries a failed
// sandbox with a back-off that grows to five minutes, so a pod still pending tries again within
// that; an older record is a pod that went elsewhere or away.
inline constexpr uint64_t kWaitingFreshS = 330;

struct Waiter {
    std::string node;
    uint64_t last_unix_s = 0;
};

struct IdleBlock {
    engine::Cidr block;
    std::string node;
    uint64_t since_unix_s = 0;
};

class Waiting {
  public:
    Waiting(EtcdClient& etcd, std::string prefix) : etcd_(etcd), prefix_(std::move(prefix)) {}

    // `node` found no block of `pool` now / got one.
    Status mark_waiting(const std::string& pool, const std::string& node);
    Status clear_waiting(const std::string& pool, const std::string& node);
    // The nodes that found none within kWaitingFreshS of `now` (a record that does not parse is
    // skipped).
    Expected<std::vector<Waiter>> waiters(const std::string& pool, uint64_t now);

    // `block` of `node` has no address in use (since its first record) / has some again.
    Status mark_idle(const std::string& pool, const engine::Cidr& block, const std::string& node);
    Status clear_idle(const std::string& pool, const engine::Cidr& block);
    Expected<std::vector<IdleBlock>> idle(const std::string& pool);

  private:
    EtcdClient& etcd_;
    std::string prefix_;
};

}  // namespace shmipam::cluster
