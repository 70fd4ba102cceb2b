// No node shut out while addresses are free (docs/cluster.md, "No node shut out"): without
// per-address borrowing (which would cost every ADD an etcd call), a node that finds no block
// left records that it waits, and a node whose block has had no address in use records that the
// block is idle; the node pass of a node holding an idle block older than blockMinAgeS gives it
// back, even its last, while some node waits and no unclaimed block serves it
// (cluster/give_back_rule.h). Keys (cluster/key_schema.h):
//
//   <prefix>/v1/pools/<pool>/waiting/<node>          {"lastUnixS": <when it last found none>,
//                                                     "usable": ["<first>-<last>", ...]}
//   <prefix>/v1/pools/<pool>/idle/<address>-<len>    {"node": "<owner>", "sinceUnixS": <s>}
//
// "usable": the pool's allocatable addresses as the waiting node knows them, so that another
// node's pass can tell whether an unclaimed block would serve it (a record without it: every
// block of the pool would). "sinceUnixS": since when the block has had no address in use on its
// node, as far as the node knows (its last release, or its claim when it never had one).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/helper_protocol.h"
#include "cluster/kv_store.h"
#include "engine/addr/ip_address.h"

namespace shmipam::cluster {

// A node that last found no block this long ago still waits: the kubelet retries a failed
// sandbox with a back-off that grows to five minutes, so a pod still pending tries again within
// that; an older record is a pod that went elsewhere or away.
inline constexpr uint64_t kWaitingFreshS = 330;

struct Waiter {
    std::string node;
    uint64_t last_unix_s = 0;
    std::vector<protocol::AddressRange> usable;  // none recorded: every address of the pool

    // Whether `block` holds an address the waiter could allocate.
    bool could_use(const engine::Cidr& block) const;
};

struct IdleBlock {
    engine::Cidr block;
    std::string node;
    uint64_t since_unix_s = 0;
};

// A waiting record read (`node` from its key), or nullopt when it does not parse or is older
// than kWaitingFreshS at `now`; an idle record read (`block_name` from its key), or nullopt.
std::optional<Waiter> parse_waiter(const std::string& node, const KeyValue& kv, uint64_t now);
std::optional<IdleBlock> parse_idle(const std::string& block_name, const KeyValue& kv);

class Waiting {
  public:
    Waiting(KvStore& kv, std::string prefix) : kv_(kv), prefix_(std::move(prefix)) {}

    // `node` found no block of `pool` now, wanting one with an address of `usable` / got one.
    Status mark_waiting(const std::string& pool, const std::string& node,
                        const std::vector<protocol::AddressRange>& usable);
    Status clear_waiting(const std::string& pool, const std::string& node);
    // The nodes that found none within kWaitingFreshS of `now` (a record that does not parse is
    // skipped).
    Expected<std::vector<Waiter>> waiters(const std::string& pool, uint64_t now);

    // `block` of `node` has had no address in use since `since_unix_s` / has some again. An
    // idle time only restarts: a record of `node` with an earlier second is replaced by this
    // one (the block was used since it was recorded), one with a later second is kept; a
    // record of another node (the block's earlier owner) is replaced. Each write compares the
    // revision read.
    Status mark_idle(const std::string& pool, const engine::Cidr& block, const std::string& node,
                     uint64_t since_unix_s);
    Status clear_idle(const std::string& pool, const engine::Cidr& block);
    Expected<std::vector<IdleBlock>> idle(const std::string& pool);

  private:
    KvStore& kv_;
    std::string prefix_;
};

}  // namespace shmipam::cluster
