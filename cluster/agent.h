// The cluster agent (docs/cluster.md, "The cluster helper"): every decision a node makes in the
// cluster store for its plugin, one function per request of the helper protocol
// (cluster/helper_protocol.h), each over one guarded store (cluster/guarded_store.h) and under
// the node's pool lock. The only writer of the node's block cache.
//
// The helper program (tools/cluster_helper.cpp) decodes a request, calls serve() over etcd and
// prints its answer; the tests call serve() in process over an in-memory store
// (tests/support/memory_kv.h), so its decisions are tested without etcd and with the
// interleavings a test chooses.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <variant>

#include "base/status.h"
#include "cluster/guarded_store.h"
#include "cluster/helper_protocol.h"
#include "cluster/kv_store.h"
#include "cluster/node_files.h"

namespace shmipam::cluster::agent {

using Answer = std::variant<protocol::BlockAnswer, protocol::FixedAnswer, protocol::GiveUpAnswer,
                            protocol::FixedOwnerAnswer, protocol::ReleaseAnswer>;

// How serve() takes the node's pool lock.
struct LockTaking {
    // The lock the caller holds and handed over (protocol::kHandedLockFd), or -1: take it.
    int handed_fd = -1;
    // How long to wait for it (kLockWaitBudgets etcd budgets: cluster/node_files.h).
    uint64_t wait_ms = 0;
};

// One request served against `kv`, as the cluster helper serves it:
//   1. the node's pool lock taken (or the handed one adopted): one agent per node and pool at a
//      time, so that two never write the block cache in the wrong order;
//   2. refused at once with the message of an agent that found the store unreachable while
//      this one waited for the lock (each waits for one budget, not every earlier one's);
//   3. the store opened guarded, the cluster id remembered on the node's first claim;
//   4. the request's op; then the node's revision floor raised to what the store answered,
//      whether the op succeeded or not.
// An unreachable store (code 50) is left in the pool's unavailable marker for the agents and
// ADDs waiting meanwhile.
Expected<Answer> serve(const protocol::Request& request, KvStore& kv, const LockTaking& lock);

// The answer as the helper prints it (the op's answer object).
nlohmann::json answer_json(const Answer& answer);

// The ops, for a caller that holds the pool lock and opened the store.
struct Context {
    const protocol::Scope& scope;
    NodeFiles files;
    GuardedStore& store;
};
// ClaimBlock (`claim`) and Refresh (`claim` null): a block claimed (or none, with Refresh),
// then the node's block cache rewritten from the store.
Expected<protocol::BlockAnswer> claim_or_refresh(const Context& c, const protocol::BlockGeometry& g,
                                                 const protocol::ClaimBlock* claim);
Expected<protocol::ReleaseAnswer> release(const Context& c, const protocol::ReleaseBlock& r);
Expected<protocol::FixedAnswer> take_fixed(const Context& c, const protocol::TakeFixed& r);
Expected<protocol::GiveUpAnswer> give_up_fixed(const Context& c, const protocol::GiveUpFixed& r);
Expected<protocol::GiveUpAnswer> give_up_unheld(const Context& c, const protocol::GiveUpUnheld& r);
Expected<protocol::FixedOwnerAnswer> read_fixed(const Context& c, const protocol::ReadFixed& r);

}  // namespace shmipam::cluster::agent
