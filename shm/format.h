// The on-disk (on-tmpfs) format of shmipam's shared state: every byte offset, bit field and magic
// number lives in this one header (layout and constants only: the packing of each shared word is
// in shm/codec.h, and the layout fingerprint in shm/layout_fingerprint.h). docs/format.md is the
// prose beside it; change them together and bump kFormatVersion on any change a reader of the
// old version would misread.
//
// Two kinds of file per network, both in <runDir>/<network>/ and both mapped shared by every
// invocation:
//   index        one per network: header page, lease table, attachment entries (hash table).
//   <block>.blk  one per address block (a CIDR of the network's block size): header page,
//                bitmap (hint), one 64-byte slot per address.
//
// Everything that other processes may change concurrently is a naturally aligned 8-byte word
// accessed with std::atomic_ref. Nothing else is shared-mutable except bytes that one owner writes
// before publishing them with a release CAS on a word (entry refs and names, slot metadata).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace shmipam::format {

inline constexpr uint32_t kFormatVersion = 4;
inline constexpr char kBlockMagic[8] = {'S', 'H', 'M', 'I', 'P', 'B', 'L', 'K'};
inline constexpr char kIndexMagic[8] = {'S', 'H', 'M', 'I', 'P', 'I', 'D', 'X'};

inline constexpr size_t kHeaderBytes = 4096;  // both kinds of file start with one header page
inline constexpr size_t kCacheLine = 64;
inline constexpr size_t kDataDirBytes = 256;     // NUL-terminated; longer dataDirs are refused
inline constexpr size_t kNetworkBytes = 128;     // NUL-terminated; longer names are refused
inline constexpr size_t kMaxRangeSets = 4;       // addresses per attachment (one per range set)
inline constexpr size_t kRangesTextBytes = 496;  // display copy of the configured ranges

static_assert(std::atomic_ref<uint64_t>::is_always_lock_free,
              "cross-process atomics need lock-free 8-byte words");

// ---------------------------------------------------------------------------------------------
// Slot state word (one per address, first word of the slot):
//   bits  0..3   SlotState
//   bits  4..15  lease index of the process driving a transition (CLAIMING / RELEASING)
//   bits 16..31  lease generation (low 16 bits), so a reaper never mistakes a lease's next holder
//   bits 32..63  generation: bumped by every change, so a stale CAS can never succeed (ABA)
// In ALLOCATED words bits 4..31 hold the owner instead: the entry index (bits 4..20) and the low
// 11 bits of the entry's tenancy generation (bits 21..31), published by the allocating CAS.
enum class SlotState : uint8_t {
    kFree = 0,
    kClaiming = 1,
    kAllocated = 2,
    kReleasing = 3,
    kCooling = 4,
    kReserved = 5,
    kSticky = 6,
};
inline constexpr int kSlotStateBits = 4;
inline constexpr int kLeaseIndexShift = 4;
inline constexpr int kLeaseIndexBits = 12;
inline constexpr int kLeaseGenShift = 16;
inline constexpr int kLeaseGenBits = 16;
inline constexpr int kSlotGenShift = 32;

// ---------------------------------------------------------------------------------------------
// Block file
struct BlockHeader {
    // Immutable once published; covered by header_crc.
    char magic[8];
    uint32_t version;
    uint32_t header_bytes;
    uint8_t family;  // 4 or 6
    uint8_t prefix;  // block prefix length
    uint8_t reserved0[2];
    uint32_t layout;      // kLayoutFingerprint of the build that wrote it
    uint8_t base[16];     // block network address, big-endian 128-bit (IPv4 in the last 4 bytes)
    uint64_t slot_count;  // 2^(address bits - prefix)
    uint64_t slot_bytes;  // sizeof(Slot)
    uint64_t bitmap_offset;
    uint64_t slots_offset;
    uint64_t file_bytes;
    uint64_t created_unix_ns;
    uint8_t boot_id[16];
    char data_dir[kDataDirBytes];
    char network[kNetworkBytes];
    uint32_t header_crc;  // CRC32C of bytes [0, offsetof(header_crc))
    uint32_t reserved1;
    uint8_t pad_immutable[1024 - 512];

    // Mutable, shared (offset 1024).
    alignas(kCacheLine) uint64_t retired;  // non-zero: damaged; build a new one, never reuse
    alignas(kCacheLine) uint64_t claims;
    uint64_t releases;
    uint64_t cas_retries;
    uint64_t rollbacks;
    uint8_t pad_tail[kHeaderBytes - 1024 - 2 * kCacheLine];
};
static_assert(sizeof(BlockHeader) == kHeaderBytes);
static_assert(offsetof(BlockHeader, header_crc) < 1024);
static_assert(offsetof(BlockHeader, retired) == 1024);

struct Slot {
    uint64_t state;  // slot state word (above)
    // The attachment holding the address: entry index + 1 (bits 0..31), range set (bits 32..39),
    // the entry's tenancy generation (bits 40..55), so a healer of an old tenancy of the entry
    // can never mistake the slot of a newer one for its own. 0 = none.
    uint64_t owner;
    uint64_t owner_fp;         // fingerprint of the owning attachment (cross-check for verify)
    uint64_t changed_boot_ns;  // CLOCK_BOOTTIME of the last release (cool-down start)
    uint64_t allocated_unix_ns;
    uint64_t reserved[3];
};
static_assert(sizeof(Slot) == 64);

// ---------------------------------------------------------------------------------------------
// Index file
//
// The lease table is two parallel arrays: kLeaseCount lease words, packed so that the scan every
// ADD and DEL makes reads only them (kLeaseCount * 8 bytes), then kLeaseCount side records.
//
// Lease word:
//   bits  0..21  pid (0 = free)
//   bits 22..37  lease generation, bumped by every acquisition, kept when freed
//   bits 38..41  4-bit hash of the holder's pid namespace, so a reader can tell a holder of
//                another namespace (whose pid means nothing here) from the first instant
//   bits 42..63  low 22 bits of the holder's start time (clock ticks since boot; /proc/pid/stat)
inline constexpr int kLeasePidBits = 22;
inline constexpr int kLeaseWordGenShift = 22;
inline constexpr int kLeaseNsShift = 38;
inline constexpr int kLeaseStartShift = 42;
// Concurrent invocations per network holding a lease. A lease is held only while state is being
// changed (tens of microseconds of a process's life), so hundreds of concurrent processes share
// far fewer; when all are held, acquirers back off and finally answer code 11.
inline constexpr uint32_t kLeaseCount = 512;

struct LeaseSide {
    uint64_t tag;               // lease gen (bits 48..63) | pid-namespace inode (bits 0..47)
    uint64_t acquired_boot_ms;  // lease gen (bits 48..63) | CLOCK_BOOTTIME ms (bits 0..47)
    // The entry the holder works on, written before it claims or releases it: entry index + 1
    // (bits 0..31) and the entry's tenancy generation (bits 32..47) as claimed / released.
    uint64_t target;
    // Journal intent, set while the holder appends to the journal: lease gen (bits 48..63) |
    // (the journal tail it read just before reserving, plus one) (bits 0..47); 0 when not
    // appending. Every record the holder reserves is at or past that tail, so a compactor that
    // keeps every record at or past the lowest live intent never drops one still being written
    // (docs/format.md, "Compaction while appending").
    uint64_t journal_intent;
};
static_assert(sizeof(LeaseSide) == 32);

// Entry state word (first word of an attachment entry):
//   bits  0..3   EntryState
//   bits  4..15  lease index (CLAIMING / RELEASING)
//   bits 16..31  lease generation (low 16 bits)
//   bits 32..47  generation (bumped when claimed for a new attachment; see codec.h)
//   bits 48..63  top 16 bits of fp1, so a prober can tell likely matches before fp1 is written
enum class EntryState : uint8_t {
    kEmpty = 0,      // never used: ends no probe (probes are bounded by max_probe instead)
    kClaiming = 1,   // an ADD owns it and is claiming addresses
    kCommitted = 2,  // the attachment holds the addresses in refs
    kReleasing = 3,  // a DEL/GC owns it and is releasing the addresses
    kTombstone = 4,  // released; reusable by any insert
};
inline constexpr int kEntryGenShift = 32;
inline constexpr int kEntryFpShift = 48;

struct AddressRef {
    uint8_t address[16];  // big-endian 128-bit (IPv4 in the last 4 bytes)
    uint8_t family;       // 4 or 6
    uint8_t block_prefix;
    uint8_t range_set;
    uint8_t reserved;
};
static_assert(sizeof(AddressRef) == 20);

inline constexpr size_t kContainerIdBytes = 72;  // display copy; identity is (fp1, fp2)
inline constexpr size_t kIfnameBytes = 16;
inline constexpr size_t kPodBytes = 48;  // "namespace/name", display only, truncated

// What a claim entry (kEntryFlagClaim) keeps in place of the pod's name (docs/fixed-ips.md).
struct ClaimFields {
    // Who uses the claim, one word so that binding, unbinding and expiry are single CASes
    // (packing: shm/codec.h, ClaimBinding):
    //   bits 62..63 = 1: bound to the sandbox entry at bits 0..31 (index + 1), tenancy 32..47
    //   bits 62..63 = 2: idle since the unix second in bits 0..61
    //   bits 62..63 = 3: expiring: whoever meets it completes the claim's release
    //   0: in use by a sandbox nobody knows (an index rebuilt in the same boot): kept until the
    //      name's next ADD binds it or an operator releases it
    uint64_t binding;
    // How long an idle claim is kept: 0 forever, 1 released at the DEL that leaves it idle,
    // N + 1 released N seconds after (N at most 100 years), kKeepIdleWhileOwnerWants kept while
    // its StatefulSet wants the pod (the engine keeps it like 0; ipam/ asks the API server).
    // Written before the entry is committed.
    uint64_t keep_idle;
    // Non-zero: the claim's journal records were written in an earlier boot (a rebuild after a
    // reboot sets it). Before the claim is bound in this boot its records are written again with
    // this boot's id, so that a rebuild later in this boot knows a sandbox of this boot may use
    // it (format.md, "Claim fields"). Cleared once they are durable.
    uint64_t records_of_earlier_boot;
    char pod[kPodBytes - 24];  // the pod that made the claim, display only, truncated
};
static_assert(sizeof(ClaimFields) == kPodBytes);
inline constexpr uint64_t kKeepIdleForever = 0;
inline constexpr uint64_t kKeepIdleNone = 1;
// 200 years + 1: beyond any N + 1 a policy can write, so never mistaken for one; a release that
// predates it reads it as 200 years and keeps the claim, as it should.
inline constexpr uint64_t kKeepIdleWhileOwnerWants = uint64_t{200} * 365 * 24 * 3600 + 1;

struct Entry {
    uint64_t state;
    // 128-bit fingerprint of the attachment: its top 16 bits are in the state word, the next 48
    // in fp1's low bits (high 16 bits: the entry generation the tenant claimed it with), the rest
    // in fp2. fp2 is stored before fp1, so a matching stamp proves both belong to the tenant.
    uint64_t fp1;
    uint64_t fp2;
    uint64_t created_unix_ns;
    uint8_t ref_count;
    uint8_t flags;
    // Pool mode: a 48-bit tag of the CNI network whose ADD made the entry (little-endian), so
    // GC of one network never releases another's attachment in a shared pool; 0 unknown (ranges
    // mode, or rebuilt from the journal: such an entry is never released by a pool-mode GC).
    uint8_t network_tag[6];
    char ifname[kIfnameBytes];
    char container_id[kContainerIdBytes];  // a claim's: its key ("sts:<ns>/<pod>/<ifname>")
    union {
        AddressRef refs[kMaxRangeSets];  // the addresses the attachment holds
        // kEntryFlagBinding: the claim whose addresses this sandbox uses, written before the
        // entry is committed: claim entry index + 1 (bits 0..31), its tenancy (bits 32..47).
        uint64_t bound_claim;
    };
    union {
        char pod[kPodBytes];  // "namespace/name", display only, truncated
        ClaimFields claim;    // kEntryFlagClaim
    };
};
static_assert(sizeof(Entry) == 256);
inline constexpr uint8_t kEntryFlagImported = 1;  // imported from host-local's files
// Rebuilt from a journal that held addresses for only some of its range sets (an ADD that never
// answered lost some records): DEL releases what it holds; a repeated ADD is refused (code 107).
inline constexpr uint8_t kEntryFlagPartial = 2;
// Held for a name, not for a sandbox (a StatefulSet pod's or a VM's fixed address,
// docs/fixed-ips.md): the entry is keyed by the claim; a rebuild after a reboot keeps it, and GC,
// which judges sandboxes, never releases it.
inline constexpr uint8_t kEntryFlagClaim = 4;
// A sandbox using a claim's addresses (docs/fixed-ips.md): keyed by container ID and interface
// like any attachment, but it holds no slot itself (ref_count 0; bound_claim names the claim).
// Its DEL, or GC, unbinds the claim if the claim is still bound to it, and frees nothing else.
inline constexpr uint8_t kEntryFlagBinding = 8;

struct IndexHeader {
    // Immutable once published; covered by header_crc.
    char magic[8];
    uint32_t version;
    uint32_t header_bytes;
    uint64_t entry_count;  // power of two
    uint64_t entry_bytes;
    uint64_t lease_count;
    uint64_t lease_offset;  // lease words; the side records follow them
    uint64_t entries_offset;
    uint64_t file_bytes;
    uint8_t block_prefix_v4;
    uint8_t block_prefix_v6;
    uint8_t reserved0[2];
    uint32_t layout;  // kLayoutFingerprint of the build that wrote it
    uint64_t created_unix_ns;
    uint8_t boot_id[16];
    char data_dir[kDataDirBytes];
    char network[kNetworkBytes];
    // Random per index: the block files of this index are named with it, so a rebuilt index
    // never adopts the blocks of an earlier one (docs/format.md, "Epochs").
    uint64_t epoch;
    uint32_t header_crc;  // CRC32C of bytes [0, offsetof(header_crc))
    uint32_t reserved1;
    uint8_t pad_immutable[1024 - 512];

    // Mutable, shared (offset 1024).
    alignas(kCacheLine) uint64_t retired;
    alignas(kCacheLine) uint64_t max_probe;  // only grows; probes look this far past the bucket
    // Next-fit cursor per range set: range index (bits 56..63) | offset in range (bits 0..55)
    // of the address handed out last, plus one (0 = none yet).
    alignas(kCacheLine) uint64_t cursor[kMaxRangeSets];
    alignas(kCacheLine) uint64_t adds;
    uint64_t dels;
    uint64_t dead_leases_reaped;
    uint64_t busy_rejections;
    uint64_t reboot_reclaims;  // addresses of another boot's sandboxes reclaimed when rebuilt
    // Damaged records (and unreadable checkpoint records) the rebuild that built this index
    // skipped: what a rebuild says it could not use.
    uint64_t rebuild_skipped_records;
    // When an idle claim's policy may free one (packing: shm/codec.h, ClaimDue): bits 0..47 the
    // earliest such unix second (0: none pending), bits 48..63 a count of changes. Lowered by
    // whoever leaves a claim idle or marks one expiring; an invocation that finds it past walks
    // the entries and then sets it from what it saw, unless it changed meanwhile
    // (docs/fixed-ips.md, "Expiry").
    uint64_t claim_due;
    // Next journal record number (fetch-add reserves records); set by scanning the journal when
    // the index is created.
    alignas(kCacheLine) uint64_t journal_tail;
    // Which segments' directory entries are known durable, one bit per segment and never a
    // high-water mark: segments are not made durable in creation order (a creator may die between
    // its link() and its directory sync while a later segment's sync has already run), so one
    // segment's sync never vouches for another's name. Bits 24..63 hold the window's first
    // segment W, bit i of bits 0..23 says segment W + i is durable. Whoever opens a segment not
    // marked for a durable append syncs the directory first (its creator may have died before
    // doing so), then marks it, sliding the window forward when the segment is past it (older
    // segments then read as not marked: their appenders sync again, which is only slower).
    uint64_t journal_names_durable;
    // For people: the range sets and reuseDelay of the config last used, rewritten only when
    // they change. ranges_seq is a seqlock: odd while being written, and then bits 1..31 name
    // the writer's pid (so a writer that died inside can be taken over); bits 32..63 count writes.
    alignas(kCacheLine) uint64_t reuse_delay_ms;
    uint64_t ranges_seq;
    char ranges_text[kRangesTextBytes];
    uint8_t pad_tail[kHeaderBytes - 1024 - 6 * kCacheLine - kRangesTextBytes];
};
static_assert(sizeof(IndexHeader) == kHeaderBytes);
static_assert(offsetof(IndexHeader, header_crc) < 1024);
static_assert(offsetof(IndexHeader, retired) == 1024);

inline constexpr uint64_t kCursorRangeShift = 56;
inline constexpr uint64_t kCursorOffsetMask = (uint64_t{1} << kCursorRangeShift) - 1;

// ---------------------------------------------------------------------------------------------
// Journal: <dataDir>/<network>/shmipam-journal.<segment, 8 decimal digits>
//
// Segments are kJournalSegmentBytes, fully allocated and zero-filled when created, never reused.
// Record n lives in segment n / kJournalRecordsPerSegment at offset
// (n % kJournalRecordsPerSegment) * sizeof(JournalRecord). Records are reserved by fetch-add on
// the index header's journal_tail, so what is durable is not a prefix: a reader scans every
// slot of every segment and keeps the records whose CRC and sequence are right.
inline constexpr char kJournalPrefix[] = "shmipam-journal.";
inline constexpr uint64_t kJournalRecordsPerSegment = 4096;

enum class JournalOp : uint8_t {
    kAlloc = 1,     // the attachment holds the address (written before the ADD commits)
    kRelease = 2,   // the attachment released it; cool-down starts at unix_ns
    kRollback = 3,  // a claim that had published it was rolled back: free, no cool-down
};

struct JournalRecord {
    uint32_t crc;  // CRC32C of bytes [4, sizeof(JournalRecord))
    uint8_t op;    // JournalOp
    uint8_t family;
    uint8_t block_prefix;
    uint8_t range_set;
    uint64_t sequence;  // the record number (its position)
    uint8_t address[16];
    uint32_t slot_gen;  // the slot word's generation after the transition: replay keeps the
                        // highest per address, never journal order
    uint32_t flags;     // the entry's flags (kEntryFlagImported, kEntryFlagClaim)
    uint64_t fp1;       // the attachment's 128-bit fingerprint
    uint64_t fp2;
    uint64_t unix_ns;
    uint8_t boot_id[16];  // of the writer: an allocation from another boot is reclaimed
    char container_id[kContainerIdBytes];
    char ifname[kIfnameBytes];
    char pod[kPodBytes];
    // The epoch of the index whose writer appended it (0: written before version 3). Past a
    // checkpoint only the checkpoint's epoch appends; a record of another epoch there is a stray
    // of a retired index (docs/format.md, "Epochs"), and replay skips it.
    uint64_t epoch;
    uint64_t claim_keep_idle;  // kEntryFlagClaim: the claim's ClaimFields::keep_idle
    uint8_t reserved[24];
};
static_assert(sizeof(JournalRecord) == 256);
inline constexpr uint64_t kJournalSegmentBytes = kJournalRecordsPerSegment * sizeof(JournalRecord);

// Checkpoint: <dataDir>/<network>/shmipam-checkpoint.<covered, 16 decimal digits>.<epoch, 16 hex
// digits>: the newest record of every address among records [0, covered), packed (each keeps its
// own sequence), and the epoch of the index that appends past it. `covered` need not be a
// multiple of kJournalRecordsPerSegment. Written aside and published by a rebuild before its
// index (covering a whole segment past anything the retired index could have reserved), and by
// the invocation whose append reaches a quarter into a segment once more than journalMaxSegments
// segments are past the newest checkpoint; then the segments wholly below `covered` are dropped.
// Readers take the newest checkpoint plus the records at or past `covered` of every segment:
// a record below it that is not in the checkpoint was written late by a retired index's writer.
// (A name without the epoch, from version 2, reads as epoch 0: no record is judged a stray.)
inline constexpr char kCheckpointPrefix[] = "shmipam-checkpoint.";

// ---------------------------------------------------------------------------------------------
// Layout fingerprint: both headers' `layout` holds kLayoutFingerprint (shm/layout_fingerprint.h),
// a hash of every struct's size and field offsets above.

}  // namespace shmipam::format
