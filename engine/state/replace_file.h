// A small file replaced whole (a node's block cache, its cluster id and revision floor, release
// marks, the pools catalog's snapshot, the owner recheck record, a Prometheus textfile), through
// the file-system seam (shm/file_system.h) like every state file, so that the tests' faulty and
// tracing file systems reach these files too. Written aside under a name of this process, then
// renamed over the file: a reader sees the old bytes or the new ones, never part of them.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace shmipam::engine {

enum class Replace {
    // Whole to a reader; after a power cut, maybe the old file (a marker or a cache of something
    // kept elsewhere: rewritten by whoever finds it stale).
    kWhole,
    // Also durable before this returns: the file synced before the rename, its directory after
    // (a power cut brings back the old bytes or the new ones, never a file that lost them).
    kDurable,
};

// Code kIo naming the file and the system's reason when it cannot be written; the file is then
// as it was, and no temporary file is left.
Status replace_file(const std::string& path, std::string_view bytes, Replace how);

}  // namespace shmipam::engine
