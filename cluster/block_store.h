// Block ownership in the cluster store (docs/cluster.md, "Blocks"): a pool's CIDR is cut into
// blocks of a fixed prefix, and a node owns the blocks whose keys it created. Calico's model
// (the seeds' Calico IPAM walkthrough), with each claim and release one etcd transaction:
//
//   <prefix>/v1/pools/<pool>/blocks/<block address>-<block prefix>
//       -> {"node": "<node>", "nonce": "<random>", "claimedUnixS": <seconds>}
//
// A node claims the first absent block in an order that starts at a hash of its name, so nodes
// do not all race for the same block; a per-node cap bounds what one node can take. A release
// deletes the key only at the revision the node read it at: a block given meanwhile to another
// node is never deleted by the first.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/kv_store.h"
#include "engine/addr/ip_address.h"

namespace shmipam::cluster {

struct Block {
    engine::Cidr cidr;
    std::string node;
    std::string nonce;
    uint64_t claimed_unix_s = 0;
    int64_t mod_revision = 0;  // what a release compares
};

class BlockStore {
  public:
    BlockStore(KvStore& kv, std::string prefix) : kv_(kv), prefix_(std::move(prefix)) {}

    // Every block of the pool that some node owns. A value that is not a block of the pool (a
    // field missing or of another type, a key that does not parse, a block of another size than
    // the pool's registration or outside its CIDR) is skipped: its key goes to `unreadable`.
    Expected<std::vector<Block>> blocks(const std::string& pool,
                                        std::vector<std::string>* unreadable = nullptr);
    // Every owned block of every pool, by pool (the operator's view: shmipamctl cluster).
    // `unreadable` (if given) gets the keys of values that are not a block (skipped).
    Expected<std::map<std::string, std::vector<Block>>> all_blocks(
        std::vector<std::string>* unreadable = nullptr);
    // The same of `kvs`, everything under <prefix>/v2/pools/ as one read gave it; and each pool's
    // geometry as its meta there says (nullopt: not readable).
    struct Geometry;
    static std::map<std::string, std::vector<Block>> blocks_by_pool(
        const std::string& prefix, const std::vector<KeyValue>& kvs,
        std::vector<std::string>* unreadable = nullptr);
    static std::map<std::string, std::optional<Geometry>> geometries(
        const std::string& prefix, const std::vector<KeyValue>& kvs);
    // The pool's blocks, in the order `node` tries them (starting at a hash of its name).
    static std::vector<engine::Cidr> claim_order(const engine::Cidr& pool_cidr, int block_prefix,
                                                 const std::string& node);
    // Claims the next free block for `node`: nullopt when the pool has none left (or the node
    // holds max_blocks already: then *at_cap is set). A block the store already gives to `node`
    // (another invocation on the node created it, or one that died after creating it) is
    // answered as the node's: adopted.
    // `worth` (if given) skips blocks with nothing allocatable in them.
    Expected<std::optional<Block>> claim_next(
        const std::string& pool, const engine::Cidr& pool_cidr, int block_prefix,
        const std::string& node, size_t max_blocks, bool* at_cap = nullptr,
        const std::function<bool(const engine::Cidr&)>& worth = {});
    // Every node must cut a pool the same way, and no two pools' CIDRs may overlap: the first
    // to claim registers the pool (cluster/pool_registry.h); a node asking for another CIDR or
    // block size, or a CIDR overlapping another pool's, is refused (code 7).
    Status check_geometry(const std::string& pool, const engine::Cidr& pool_cidr, int block_prefix);
    // The pool's CIDR and block prefix as its first claim recorded them; nullopt when none is
    // recorded (no block was ever claimed) or the record cannot be read.
    struct Geometry {
        engine::Cidr pool_cidr;
        int block_prefix = 0;
    };
    Expected<std::optional<Geometry>> geometry(const std::string& pool);
    // A block key's value read as a block of a pool cut as `g` (when known) / the meta key's as
    // the geometry (nullopt when it is not one).
    static std::optional<Block> parse(const KeyValue& kv, const std::optional<Geometry>& g);
    static std::optional<Geometry> parse_geometry(const KeyValue& kv);
    // Claims the block holding `address` for `node`, as Calico's AssignIP does: the block (ours
    // already, or claimed now), or an error naming the node that owns it (code 101). A new block
    // counts against max_blocks like any other: at the cap, code 100 saying so.
    Expected<Block> claim_holding(const std::string& pool, const engine::Cidr& pool_cidr,
                                  int block_prefix, const engine::IpAddress& address,
                                  const std::string& node, size_t max_blocks = SIZE_MAX);
    // Gives a block back if it is still as read (its mod_revision): false when it changed.
    Expected<bool> release(const std::string& pool, const Block& block);

    std::string key_of(const std::string& pool, const engine::Cidr& block) const;
    KvStore& kv() const { return kv_; }
    const std::string& prefix() const { return prefix_; }

  private:
    // The pool's blocks read as cut by `g` (nullopt: by their keys alone).
    Expected<std::vector<Block>> blocks_cut_as(const std::string& pool,
                                               const std::optional<Geometry>& g,
                                               std::vector<std::string>* unreadable = nullptr);
    Expected<std::optional<Block>> try_claim(const std::string& pool, const engine::Cidr& block,
                                             const std::string& node);

    KvStore& kv_;
    std::string prefix_;
};

}  // namespace shmipam::cluster
