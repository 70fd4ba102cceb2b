// What the unit tests of cluster logic read back after an agent or a pass ran: which node the
// in-memory store gives each block of a pool, and the blocks a node's cache holds.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "cluster/block_cache.h"
#include "cluster/block_store.h"
#include "tests/support/memory_kv.h"

namespace shmipam::testing {

// block CIDR -> its node, as the store says.
inline std::map<std::string, std::string> block_owners(MemoryEtcd& etcd, const std::string& prefix,
                                                       const std::string& pool) {
    MemoryKv kv(etcd);
    auto blocks = cluster::BlockStore(kv, prefix).blocks(pool);
    EXPECT_TRUE(blocks);
    std::map<std::string, std::string> out;
    if (blocks) {
        for (const auto& b : *blocks) out[b.cidr.to_string()] = b.node;
    }
    return out;
}

// The block CIDRs of the node's cache of `pool` (its cluster state directory `state_dir`).
inline std::set<std::string> cached_blocks(const std::string& state_dir, const std::string& pool) {
    auto blocks = cluster::read_block_cache(cluster::block_cache_path(state_dir, pool));
    EXPECT_TRUE(blocks);
    std::set<std::string> out;
    if (blocks) {
        for (const auto& b : *blocks) out.insert(b.cidr.to_string());
    }
    return out;
}

}  // namespace shmipam::testing
