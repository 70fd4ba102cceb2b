// The cluster store's keys (docs/cluster.md, "The store's schema"): every key shmipam writes in
// etcd, made and read here alone, so the writers (the cluster helper) and the readers
// (shmipamctl's cluster verbs, the tests) agree on one schema. Under the configured prefix
// (default "/shmipam"):
//
//   <prefix>/v2/schema                                 {"version": 2}: the layout the store holds
//   <prefix>/v2/registry                               bumped by every pool registration
//   <prefix>/v2/cidrs/<address>-<len>                  a pool's CIDR: which pool holds it
//   <prefix>/v2/pools/<pool>/meta                      the pool's CIDR and block prefix
//   <prefix>/v2/pools/<pool>/blocks/<address>-<len>    a block claim: the node that owns it
//   <prefix>/v2/pools/<pool>/claims/<fixed claim key>  a fixed claim: address, node, policy
//   <prefix>/v2/pools/<pool>/addresses/<address>       the fixed claim holding an address
//   <prefix>/v2/pools/<pool>/waiting/<node>            a node that found no block left
//   <prefix>/v2/pools/<pool>/idle/<address>-<len>      a block with no address in use
//
// e.g. "/shmipam/v2/pools/default-v4/blocks/10.1.0.64-26" (a '-' for the '/' of the CIDR, which
// would read as a path separator). A pool's name is bound to its CIDR in the cluster once (meta
// and cidrs, written in one transaction), and no pool is registered whose CIDR overlaps
// another's (cluster/pool_registry.h): so a block key names one set of addresses, and no two
// pools' blocks overlap whatever the pools are called. "v2" is the schema's version: a layout
// that changes what a key means gets a new one, and a written migration (cluster/store_migration.h;
// v1, the layout before the registry and the claims' policy, had only the pools/ keys).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "engine/addr/ip_address.h"

namespace shmipam::cluster::keys {

inline constexpr int kSchemaVersion = 2;
inline constexpr std::string_view kSchema = "/v2/pools/";
inline constexpr std::string_view kV1Pools = "/v1/pools/";
inline constexpr std::string_view kBlocks = "/blocks/";
inline constexpr std::string_view kClaims = "/claims/";
inline constexpr std::string_view kAddresses = "/addresses/";
inline constexpr std::string_view kMeta = "/meta";
inline constexpr std::string_view kWaiting = "/waiting/";
inline constexpr std::string_view kIdle = "/idle/";

// Every pool's keys: <prefix>/v2/pools/
inline std::string pools(const std::string& prefix) {
    return prefix + std::string(kSchema);
}
// The layout's version record, the registry's generation, and the pools' CIDRs.
inline std::string schema(const std::string& prefix) {
    return prefix + "/v2/schema";
}
inline std::string registry(const std::string& prefix) {
    return prefix + "/v2/registry";
}
inline std::string cidrs(const std::string& prefix) {
    return prefix + "/v2/cidrs/";
}
// The keys of the layout before this one (read by the migration only).
inline std::string v1_pools(const std::string& prefix) {
    return prefix + std::string(kV1Pools);
}
// Every key of one pool: <prefix>/v2/pools/<pool>/
inline std::string pool_root(const std::string& prefix, const std::string& pool) {
    return pools(prefix) + pool + "/";
}
inline std::string meta(const std::string& prefix, const std::string& pool) {
    return pools(prefix) + pool + std::string(kMeta);
}
inline std::string blocks(const std::string& prefix, const std::string& pool) {
    return pools(prefix) + pool + std::string(kBlocks);
}
inline std::string claims(const std::string& prefix, const std::string& pool) {
    return pools(prefix) + pool + std::string(kClaims);
}
inline std::string addresses(const std::string& prefix, const std::string& pool) {
    return pools(prefix) + pool + std::string(kAddresses);
}

inline std::string waiting(const std::string& prefix, const std::string& pool) {
    return pools(prefix) + pool + std::string(kWaiting);
}
inline std::string waiter(const std::string& prefix, const std::string& pool,
                          const std::string& node) {
    return waiting(prefix, pool) + node;
}
inline std::string idle(const std::string& prefix, const std::string& pool) {
    return pools(prefix) + pool + std::string(kIdle);
}

// A block's name in its key: "10.1.0.64-26".
inline std::string block_name(const engine::Cidr& block) {
    return block.network().to_string() + "-" + std::to_string(block.prefix);
}
inline std::optional<engine::Cidr> block_of_name(std::string_view name) {
    const size_t dash = name.rfind('-');
    if (dash == std::string_view::npos) return std::nullopt;
    return engine::Cidr::parse(std::string(name.substr(0, dash)) + "/" +
                               std::string(name.substr(dash + 1)));
}

inline std::string cidr(const std::string& prefix, const engine::Cidr& pool_cidr) {
    return cidrs(prefix) + block_name(engine::Cidr{pool_cidr.network(), pool_cidr.prefix});
}
inline std::string block(const std::string& prefix, const std::string& pool,
                         const engine::Cidr& cidr) {
    return blocks(prefix, pool) + block_name(cidr);
}
inline std::string idle_block(const std::string& prefix, const std::string& pool,
                              const engine::Cidr& cidr) {
    return idle(prefix, pool) + block_name(cidr);
}
inline std::string claim(const std::string& prefix, const std::string& pool,
                         const std::string& claim_key) {
    return claims(prefix, pool) + claim_key;
}
inline std::string address(const std::string& prefix, const std::string& pool,
                           const engine::IpAddress& a) {
    return addresses(prefix, pool) + a.to_string();
}

// A key under pools(prefix) split into its pool and what follows the kind's part: for
// "<pools>db/claims/sts:ns/db-0/eth0" and kClaims, {"db", "sts:ns/db-0/eth0"}; nullopt for a key
// of another kind.
struct PoolKey {
    std::string pool;
    std::string rest;
};
inline std::optional<PoolKey> split(const std::string& prefix, std::string_view key,
                                    std::string_view kind) {
    const std::string root = pools(prefix);
    if (key.substr(0, root.size()) != root) return std::nullopt;
    const std::string_view tail = key.substr(root.size());
    const size_t slash = tail.find('/');
    if (slash == std::string_view::npos || tail.substr(slash, kind.size()) != kind) {
        return std::nullopt;
    }
    return PoolKey{std::string(tail.substr(0, slash)),
                   std::string(tail.substr(slash + kind.size()))};
}

}  // namespace shmipam::cluster::keys
