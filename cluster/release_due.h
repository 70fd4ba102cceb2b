// Blocks a node means to give back (docs/cluster.md, "Giving a block back"): one file per
// block, <dir>/<pool>.release/<block network>-<prefix>, holding the unix second from which the
// cluster helper may try. A DEL that leaves a block with no address in use writes it; a DEL
// after that second starts the helper, which gives the block back or writes a later second
// (the block is too young, an address still cools) or removes the file (in use again, or not
// this node's any more). Written by the plugin and the helper; a lost file only delays a release.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/addr/ip_address.h"

namespace shmipam::cluster {

struct ReleaseDue {
    engine::Cidr block;
    uint64_t due_unix_s = 0;
};

void write_release_due(const std::string& dir, const std::string& pool, const engine::Cidr& block,
                       uint64_t due_unix_s);
void remove_release_due(const std::string& dir, const std::string& pool, const engine::Cidr& block);
// Every block the pool's directory names (none when it does not exist).
std::vector<ReleaseDue> read_release_due(const std::string& dir, const std::string& pool);

}  // namespace shmipam::cluster
