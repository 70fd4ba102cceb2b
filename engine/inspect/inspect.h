// Reading a network's state for people and checks: dump (dump.cpp: what is allocated to whom)
// and verify (verify.cpp: every invariant of the arenas, the index and the journal). Read-only:
// never changes a word (repairs are engine/recovery's).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/addr/ip_address.h"
#include "engine/state/network_store.h"

namespace shmipam::engine {

struct SlotView {
    IpAddress address;
    std::string block;  // the block's CIDR
    std::string state;  // free, claiming, allocated, releasing, cooling, reserved, sticky
    uint32_t generation = 0;
    int32_t holder_pid = 0;  // claiming / releasing: the lease holder's pid
    std::string container_id;
    std::string ifname;
    std::string pod;
    bool imported = false;
    bool claim = false;   // held for a name (kEntryFlagClaim), not for a sandbox
    std::string used_by;  // a claim's: the container ID of the sandbox bound to it, if any
    uint64_t allocated_unix_ns = 0;
    uint64_t released_boot_ns = 0;  // cooling: when the cool-down began (CLOCK_BOOTTIME)
};

struct BlockView {
    std::string cidr;
    uint64_t slots = 0;
    uint64_t in_use = 0;  // not free and not cooling
    uint64_t cooling = 0;
    uint64_t claims = 0, releases = 0, cas_retries = 0, rollbacks = 0;
};

struct LeaseView {
    uint32_t index = 0;
    int32_t pid = 0;
    bool alive = false;
};

struct RangeView {
    size_t range_set = 0;
    std::string subnet;  // CIDR
    IpAddress start, end;
    uint64_t size = 0;
    uint64_t in_use = 0;  // allocated (or mid-transition) addresses inside [start, end]
    uint64_t cooling = 0;
};

struct NetworkDump {
    std::string network;
    std::string data_dir;
    std::string ranges;                  // as the config last used them describe them
    std::vector<RangeView> range_views;  // the same, parsed, with utilisation
    uint64_t reuse_delay_ms = 0;
    std::vector<BlockView> blocks;
    std::vector<SlotView> slots;    // every slot that is not free
    std::vector<LeaseView> leases;  // held leases
    uint64_t adds = 0, dels = 0, dead_leases_reaped = 0, busy_rejections = 0, reboot_reclaims = 0;
    uint64_t rebuild_skipped_records = 0;  // damaged journal records the last rebuild skipped
};

Expected<NetworkDump> dump(NetworkStore& store);

// How many addresses in [first, last] the blocks' bitmaps mark as not claimable (allocated,
// mid-transition, cooling, reserved): the hint, not the slots' truth, so cheap enough for an ADD
// (cluster mode's claim-ahead check reads it for the node's blocks). Blocks not created yet
// count none.
Expected<uint64_t> hinted_taken(NetworkStore& store, const IpAddress& first, const IpAddress& last);

// How many slots of the block holding `a` are allocated or being released (neither free,
// cooling nor being claimed), from the slots' states: 0 when the block has no file. Cluster
// mode's DEL asks it of the block it released in.
Expected<uint64_t> in_use_in_block(NetworkStore& store, const IpAddress& a);

struct Violation {
    std::string kind;    // stable identifier, e.g. "duplicate-address"
    std::string detail;  // human sentence naming the address / entry / lease
};

struct VerifyReport {
    std::vector<Violation> violations;
    uint64_t journal_records = 0;
    uint64_t journal_invalid = 0;  // damaged or torn records (skipped by replay; counted only)
    uint64_t journal_strays = 0;   // late records of retired indexes (skipped by replay)
    uint64_t hint_mismatches = 0;  // bitmap bits that disagree with slots (harmless, counted)
    uint64_t slots_checked = 0;
    uint64_t entries_checked = 0;
};

Expected<VerifyReport> verify(NetworkStore& store);

const char* slot_state_name(format::SlotState s);

}  // namespace shmipam::engine
