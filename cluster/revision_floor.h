// The highest store revision a node has seen (docs/cluster.md, "The store went back in time").
// etcd's revision (ResponseHeader.revision of every answer) only grows, so a store that answers
// with a lower one than a node has already seen was rebuilt from nothing or restored from a
// snapshot: the blocks and fixed claims this node holds may be missing from it, and claiming
// there could give an address this node serves to another node as well. The cluster id does not
// catch it (etcd derives it from the initial token and peer URLs, the same after a rebuild with
// the same flags), nor would a key of our own (a snapshot holds it). Kept beside the cluster id:
//
//   <dataDir>/_cluster/store-revision       "<revision>\n", replaced durably (temporary file,
//                                           fsync, rename, fsync of the directory)
//   <dataDir>/_cluster/store-revision.lock  flock'd around every read-and-raise: helpers of
//                                           different pools share no pool lock, and the value
//                                           must never go down
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace shmipam::cluster {

std::string revision_floor_path(const std::string& dir);

// Ok when `seen` is at or above the revision remembered in dir (or none is remembered yet: the
// first run, which records one when it succeeds). Code 7 when it is lower (the store went back
// in time: the message says what that means and what to do) or the file cannot be read (named).
// A `seen` of 0 (an answer without a header) is no evidence either way: accepted.
Status check_revision_floor(const std::string& dir, int64_t seen);

// Remembers `seen` if it is higher than what dir remembers (never lowers it, also with
// concurrent callers). Creates dir and the file if needed.
Status raise_revision_floor(const std::string& dir, int64_t seen);

// Remembers exactly `revision` (the operator's recovery accepting a new store: the one place
// the value may go down).
Status reset_revision_floor(const std::string& dir, int64_t revision);

// The remembered revision: 0 when none is; an error naming the file when it cannot be read.
Expected<int64_t> remembered_revision(const std::string& dir);

}  // namespace shmipam::cluster
