// What the engine needs to know about a network: its name, where its state lives, its range
// sets and policy knobs. The plugin builds it from the CNI config; the engine never reads env.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/addr/ip_address.h"
#include "engine/addr/range.h"
#include "shm/format.h"

namespace shmipam::engine {

// How many range sets one network may have (an attachment's entry holds one ref per set).
inline constexpr size_t kMaxRangeSets = format::kMaxRangeSets;

struct NetworkConfig {
    std::string name;
    std::string data_dir = "/var/lib/cni/networks";  // as host-local
    std::string run_dir = "/run/shmipam";            // arenas: <run_dir>/<name>/
    std::vector<RangeSet> range_sets;
    // When non-zero, the attachment index is sized for this many addresses rather than for the
    // ranges' (pool mode: a pool may grow within its subnet, and the index is sized once).
    u128 index_capacity = 0;
    uint8_t block_prefix_v4 = 24;
    uint8_t block_prefix_v6 = 120;
    uint64_t reuse_delay_ms = 30'000;  // cool-down before a released address is handed out again

    // Durability of the journal: kAuto is fsync unless the dataDir is on tmpfs (then none).
    enum class Durability { kAuto, kFsync, kNone };
    Durability durability = Durability::kAuto;
    // How fsync is done: auto picks the measured default (docs/durability.md).
    enum class Backend { kAuto, kFdatasync, kIoUring };
    Backend backend = Backend::kAuto;
    // After a reboot, allocations of sandboxes that cannot exist any more are reclaimed when the
    // state is rebuilt; false keeps them.
    bool reclaim_on_reboot = true;
    // Once more than this many journal segments (1 MiB each) are past the newest checkpoint, the
    // invocation that starts the next one writes a checkpoint and drops the segments it covers.
    uint64_t journal_max_segments = 8;
    std::string boot_id_path = "/proc/sys/kernel/random/boot_id";
    // What opening the state writes to the index's display of its config (shmipamctl ls):
    // kRecord these ranges; kKeep what the last recording open wrote (an open only to read or
    // release, whose ranges are wider than what the network allocates from); kWithdrawn that,
    // marked as no longer configured (a pool gone from its directory).
    enum class Display { kRecord, kKeep, kWithdrawn };
    Display display = Display::kRecord;

    std::string state_dir() const { return run_dir + "/" + name; }
    std::string host_local_dir() const { return data_dir + "/" + name; }
    std::string journal_dir() const { return data_dir + "/" + name; }  // beside host-local's files
};

struct AttachmentKey {
    std::string container_id;
    std::string ifname;
};

struct PodRef {
    std::string namespace_;
    std::string name;
};

}  // namespace shmipam::engine
