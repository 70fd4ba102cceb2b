// The blocks a node owns, as its last look at the cluster store saw them: one file per pool,
// <dataDir>/_cluster/<pool>.blocks, written by the cluster helper (tools/cluster_helper.cpp)
// through a temporary file and a rename, read by the plugin on every ADD of a cluster-mode pool.
// So the plugin allocates inside its blocks without asking etcd, and links no etcd client.
//
// Format: one line per block, "<block CIDR> <mod_revision>\n", e.g. "10.1.0.64/26 1042\n".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/addr/ip_address.h"

namespace shmipam::cluster {

struct OwnedBlock {
    engine::Cidr cidr;
    int64_t mod_revision = 0;
};

std::string block_cache_path(const std::string& dir, const std::string& pool);
// The file's blocks; none when it does not exist. Code 105 when a line cannot be read.
Expected<std::vector<OwnedBlock>> read_block_cache(const std::string& path);
// Replaces the file (temporary file, fsync, rename).
Status write_block_cache(const std::string& path, const std::vector<OwnedBlock>& blocks);

}  // namespace shmipam::cluster
