// Which etcd cluster a node's blocks were claimed in. A node remembers the cluster id of the first
// etcd it claimed from (<dir>/cluster-id); an etcd that answers with another id (a cluster
// rebuilt from nothing, a config pointing at another cluster) is refused: claiming there would
// hand this node's blocks, which it still allocates from, to other nodes as well.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace shmipam::cluster {

// Ok when `seen` is the id remembered in dir (which is written, durably, if there is none yet);
// an error (code 7) naming both ids and the file otherwise.
Status check_cluster_id(const std::string& dir, uint64_t seen);

// Whether dir already holds a cluster id (its file exists): what a reader that must not write
// one asks first (the node pass: a dataDir without it is not the node's, or not mounted).
bool has_cluster_id(const std::string& dir);
// The path of the file (for messages).
std::string cluster_id_path(const std::string& dir);
// Remembers `id` in dir whatever it held (the operator's recovery accepting a new store).
Status replace_cluster_id(const std::string& dir, uint64_t id);

}  // namespace shmipam::cluster
