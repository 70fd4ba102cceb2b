// Which pool holds which addresses in the cluster (docs/cluster.md, "The store's schema"): a
// pool's name is bound to its CIDR and block prefix once, and no pool is registered whose CIDR
// overlaps a registered pool's. Calico keys blocks by CIDR so that two pools can never hand out
// the same block; here a pool's keys stay under its name (its local files, its locks and its
// operators' verbs all speak of the name), and the binding gives the same guarantee: a block key
// of a pool names addresses of that pool's CIDR alone, cut one way, whatever the pools are
// called.
//
//   <prefix>/v2/pools/<pool>/meta        {"cidr": "10.1.0.0/16", "blockPrefix": 26}
//   <prefix>/v2/cidrs/<address>-<len>    {"pool": "<pool>"}
//   <prefix>/v2/registry                 a counter every registration and drop bumps
//
// blockPrefix 0: a pool of fixed addresses, never cut into blocks. A registration reads the
// counter, then the registered CIDRs, and writes both keys in one transaction compared on the
// counter's revision: two nodes registering overlapping pools at once cannot both succeed.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/kv_store.h"
#include "engine/addr/ip_address.h"

namespace shmipam::cluster {

// A pool as the registry holds it.
struct RegisteredPool {
    std::string pool;
    engine::Cidr cidr;
    int block_prefix = 0;  // 0: fixed addresses
};

// Ok when `pool` is registered as (pool_cidr, block_prefix), registering it when it is not.
// Code 7, saying how to change it, when the pool is registered another way (another CIDR or
// block prefix), when its CIDR overlaps another registered pool's, or when the store holds
// blocks of the pool of another size (its meta removed by hand).
Status register_pool(KvStore& store, const std::string& prefix, const std::string& pool,
                     const engine::Cidr& pool_cidr, int block_prefix);

// The pool's registration: nullopt when it has none (or it does not parse).
Expected<std::optional<RegisteredPool>> registration(KvStore& store, const std::string& prefix,
                                                     const std::string& pool);

// The pool a CIDR record names, or "" when it does not parse.
std::string pool_of_record(const KeyValue& kv);

// Whether two CIDRs share an address (of one family, one holds the other's network address).
bool cidrs_overlap(const engine::Cidr& a, const engine::Cidr& b);

// A meta value read (the pool named by the caller), or nullopt when it is not one.
std::optional<RegisteredPool> parse_meta(const std::string& pool, const std::string& value);

// Removes the pool's registration (its meta and CIDR record, as read) and every key left under
// the pool (address, waiting and idle records), in one transaction that also requires that no
// block and no fixed claim of the pool is left: false when one is, or when the registration
// changed since it was read (nothing removed).
Expected<bool> drop_pool(KvStore& store, const std::string& prefix, const std::string& pool,
                         const std::optional<KeyValue>& meta,
                         const std::optional<KeyValue>& cidr_record);

}  // namespace shmipam::cluster
