// The life of a network's state: opening it (creating the index on first use, filled by the
// filler recovery hands in), retiring it, and removing what a retired or superseded state left.
// In the engine, this is the only code that deletes state files (below it, shm removes its own
// temp files and the journal segments a checkpoint covers).
#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "base/clock.h"
#include "base/directory.h"
#include "base/fault_point.h"
#include "engine/state/config_display.h"
#include "engine/state/network_store.h"
#include "shm/atomic_word.h"
#include "shm/dir_lock.h"
#include "shm/file_system.h"

namespace shmipam::engine {

namespace {

constexpr uint64_t kMinEntries = 1024;
// How long a first invocation waits, in all, for another one that is building the index (a scan
// of the journal and a replay: milliseconds, a second for a long journal on a loaded node).
// Past it: 11, and the runtime tries again.
constexpr uint64_t kCreatorWaitNs = 5'000'000'000;
// Looks again an open makes when it finds the index gone or retired: each finding means a
// replacement is under way, which one rebuild ends; past this many in a row the state keeps
// being replaced, and the open answers 11.
constexpr int kOpenRetries = 3;
constexpr uint64_t kMaxEntries = uint64_t{1} << 17;

// Room for every attachment the ranges can serve at a load factor of at most 0.8.
uint64_t entries_for(const NetworkConfig& cfg) {
    u128 need = ~u128{0};
    for (const auto& set : cfg.range_sets) need = std::min(need, usable_count(set));
    if (cfg.index_capacity != 0) need = cfg.index_capacity;
    need = need + need / 4;
    uint64_t n = kMinEntries;
    while (n < kMaxEntries && u128{n} < need) n <<= 1;
    return n;
}

// Journal durability: fsync unless told otherwise, or the dataDir is on tmpfs (nothing on tmpfs
// outlives a reboot, so a sync buys nothing).
shm::SyncMode sync_mode_for(const NetworkConfig& cfg) {
    using D = NetworkConfig::Durability;
    using B = NetworkConfig::Backend;
    bool durable = cfg.durability == D::kFsync;
    if (cfg.durability == D::kAuto) {
        struct statfs sf {};
        durable = !(::statfs(cfg.journal_dir().c_str(), &sf) == 0 && sf.f_type == TMPFS_MAGIC);
    }
    if (!durable) return shm::SyncMode::kNone;
    // The default backend is the one measured faster for a one-shot process (docs/durability.md).
    return cfg.backend == B::kIoUring ? shm::SyncMode::kIoUring : shm::SyncMode::kFdatasync;
}

}  // namespace

Expected<std::unique_ptr<NetworkStore>> NetworkStore::open(const NetworkConfig& cfg,
                                                           const shm::ProcessIdentity& self,
                                                           const IndexFiller& fill) {
    std::unique_ptr<NetworkStore> s(new NetworkStore());
    s->dir_ = cfg.state_dir();
    s->who_ = shm::FileIdentity{cfg.data_dir, cfg.name};
    s->self_ = self;
    s->prefix_v4_ = cfg.block_prefix_v4;
    s->prefix_v6_ = cfg.block_prefix_v6;
    s->journal_max_segments_ = cfg.journal_max_segments;
    if (auto st = shm::make_dirs(s->dir_); !st) return st.error();
    if (auto st = shm::make_dirs(cfg.journal_dir()); !st) return st.error();
    s->journal_ = std::make_unique<shm::Journal>(cfg.journal_dir(), sync_mode_for(cfg));
    // Before anything is judged by it: without it, a live index would look like another boot's.
    auto boot_id = shm::read_boot_id(cfg.boot_id_path);
    if (!boot_id) return boot_id.error();
    s->boot_id_ = *boot_id;
    shm::IndexGeometry g{entries_for(cfg), cfg.block_prefix_v4, cfg.block_prefix_v6};
    const std::string index_path = s->dir_ + "/" + shm::IndexFile::kFileName;
    // The index may vanish between our looks (retired and removed by another invocation): a
    // state being replaced, not an I/O failure. Look again; past a few tries, answer 11.
    // One bound for the whole open, however many times the index is found missing: the wait
    // for another creator's lock is taken from it (claim-protocol.md, "Every wait").
    s->open_deadline_ns_ = base::boot_ns() + kCreatorWaitNs;
    for (int attempt = 0;; ++attempt) {
        if (!shm::file_exists(index_path)) {
            if (auto st = s->create_index(cfg, g, fill); !st) {
                if (st.error().code == Code::kTryAgainLater && attempt < kOpenRetries &&
                    base::boot_ns() < s->open_deadline_ns_) {
                    continue;
                }
                return st.error();
            }
        }
        auto index = shm::IndexFile::open_existing(index_path, shm::Access::kReadWrite, &s->who_);
        if (!index) {
            if (index.error().code != Code::kIo || shm::file_exists(index_path)) {
                return index.error();
            }
            if (attempt < kOpenRetries) continue;  // retired and removed between our looks: rebuild
            return shm::IndexFile::being_replaced(index.error());
        }
        s->index_ = std::move(*index);
        // An index from another boot (a run directory that is not tmpfs survived a reboot) holds
        // sandboxes that cannot exist any more: retire it, and the rebuild reclaims them.
        const bool other_boot =
            std::memcmp(s->index_.header().boot_id, s->boot_id_.data(), 16) != 0;
        if (other_boot) s->index_.retire();
        if (!s->index_.retired() || attempt >= kOpenRetries) break;
        s->remove_retired_index();
    }
    s->journal_->set_names_durable_word(&s->index_.header().journal_names_durable);
    if (s->index_.header().epoch != s->epoch_) {
        s->blocks_.clear();  // another creator's index won: its blocks are the ones
        s->epoch_ = s->index_.header().epoch;
    }
    s->journal_->set_epoch(s->epoch_);
    const auto& h = s->index_.header();
    if (h.block_prefix_v4 != cfg.block_prefix_v4 || h.block_prefix_v6 != cfg.block_prefix_v6) {
        return make_error(Code::kInvalidConfig, "blockSize differs from the one network \"" +
                                                    cfg.name + "\" was created with (IPv4 /" +
                                                    std::to_string(h.block_prefix_v4) + ", IPv6 /" +
                                                    std::to_string(h.block_prefix_v6) + ")");
    }
    if (s->index_.retired()) {
        return make_error(Code::kTryAgainLater, "the network's state is being rebuilt",
                          s->index_.path());
    }
    record_config(s->index_.header(), cfg);
    return s;
}

namespace {

// How long a remover waits for another one's check-and-unlink (microseconds of work).
constexpr std::chrono::milliseconds kRemoverLockWait{2000};

}  // namespace

bool NetworkStore::index_at_path_is_ours() {
    auto at_path = shm::IndexFile::epoch_at(dir_ + "/" + shm::IndexFile::kFileName);
    return at_path && at_path->has_value() && **at_path == index_.header().epoch;
}

void NetworkStore::remove_retired_index() {
    // Only a retired index is ever removed, and unlinking is safe under processes that map it:
    // their mappings stay valid, and they see the retired flag at their next check. Removed only
    // if the name still names *this* index, checked and unlinked under the directory lock: a
    // late remover must never unlink the index a rebuild has published since: the processes
    // that map that index would go on allocating in it, never told, while the next invocation
    // builds another, and one address would be handed out from two arenas. A remover that cannot
    // get the lock leaves the file for the next one.
    if (!index_.retired()) return;
    auto lock = shm::DirLock::acquire(dir_, kRemoverLockWait);
    if (!lock || !index_at_path_is_ours()) return;
    shm::file_system().unlink(dir_ + "/" + shm::IndexFile::kFileName);
}

Error NetworkStore::retire(const std::string& why) {
    index_.retire();
    SHMIPAM_FAULT("retire.after_flag");
    remove_retired_index();
    return make_error(Code::kTryAgainLater,
                      "the network's state was retired (" + why +
                          "); the next invocation rebuilds it from the journal");
}

Status NetworkStore::create_index(const NetworkConfig& cfg, const shm::IndexGeometry& g,
                                  const IndexFiller& fill) {
    // The state is new: from the journal if there is one, else from host-local's files (what
    // `fill` does). One creator at a time, under the directory lock: the others wait and map
    // its index. Built aside, published by link().
    const uint64_t now = base::boot_ns();
    const auto wait = std::chrono::milliseconds(
        open_deadline_ns_ > now ? (open_deadline_ns_ - now) / 1'000'000 : 0);
    auto lock = shm::DirLock::acquire(dir_, wait);
    if (!lock) return lock.error();
    if (shm::file_exists(dir_ + "/" + shm::IndexFile::kFileName)) return Ok{};  // built meanwhile
    auto scan = shm::Journal::scan(cfg.journal_dir());
    if (!scan) return scan.error();
    // Writers of a retired (or removed) index may still hold sequences they reserved and write
    // them late: the new index appends from past all of them, and the records below are read
    // from now on only through the checkpoint this rebuild writes: a late record never
    // overwrites a new one and is never replayed.
    const uint64_t tail = shm::Journal::rebuilt_tail(*scan);
    auto open_block = [this](const IpAddress& a, const shm::BlockFile::Prefill& prefill) {
        return block_for(a, true, prefill);
    };
    auto created = shm::IndexFile::open_or_create(
        dir_, g, who_, boot_id_, [&](shm::IndexFile& aside) -> Status {
            epoch_ = aside.header().epoch;
            journal_->set_epoch(epoch_);
            blocks_.clear();
            aside.header().journal_tail = tail;
            creation_.created = true;
            auto filled = fill(*scan, aside, open_block, boot_id_);
            if (!filled) return filled.error();
            if (filled->rebuilt) {
                creation_.rebuilt = true;
                creation_.rebuilt_addresses = filled->rebuilt_addresses;
                creation_.reclaimed_after_reboot = filled->reclaimed_after_reboot;
                aside.header().reboot_reclaims = filled->reclaimed_after_reboot;
                aside.header().rebuild_skipped_records = filled->skipped_records;
            } else {
                creation_.imported = filled->to_journal.size();
            }
            // Every index begins with a checkpoint naming it, written before the index is
            // published: what was replayed (nothing, for a new network), so that a late record
            // below `tail` is never read in its place. Then the old segments go.
            const bool sync = journal_->mode() != shm::SyncMode::kNone;
            if (auto st =
                    shm::Journal::compact(cfg.journal_dir(), tail, filled->newest, sync, epoch_);
                !st) {
                return st;
            }
            creation_.compacted = true;
            // Imports (allocations that exist nowhere in the journal yet) and a rebuild's
            // ROLLBACKs, past the checkpoint, before publishing. Nobody else sees the aside
            // index: no intent needed.
            if (filled->to_journal.empty()) return Ok{};
            return journal_->append(aside.header().journal_tail, filled->to_journal,
                                    shm::JournalIntent{});
        });
    if (!created) return created.error();
    // Still under the lock: blocks of the index this one replaced, or of a creator that failed.
    if (creation_.created && created->header().epoch == epoch_)
        remove_blocks_of_other_epochs(*created);
    return Ok{};
}

void NetworkStore::remove_blocks_of_other_epochs() {
    // Only while our index is the one the name points to, under the directory lock (which keeps
    // it so: a new index can only be published by a creator holding it): a creator whose index
    // was replaced meanwhile would otherwise remove its successor's blocks, and the successor's
    // allocations with them (a block recreated empty reads every address FREE).
    auto lock = shm::DirLock::acquire(dir_, kRemoverLockWait);
    if (!lock || !index_at_path_is_ours()) return;
    remove_blocks_of_other_epochs(index_);
}

void NetworkStore::remove_blocks_of_other_epochs(const shm::IndexFile& current) {
    // Blocks of an index that no longer exists (before a rebuild) or that lost the race to be
    // published: nobody will ever map them again by name. Unlinking is safe even if a process
    // still maps one (its mapping stays valid; it is of a retired state). The caller holds the
    // directory lock, and `current` is the published index.
    const uint64_t epoch = current.header().epoch;
    char mine[32];
    std::snprintf(mine, sizeof mine, ".%016llx.blk", (unsigned long long)epoch);
    base::for_each_entry(dir_, [&](std::string_view n) {
        if (n.ends_with(".blk") && n[0] != '.' && n.find(mine) == std::string_view::npos) {
            shm::file_system().unlink(dir_ + "/" + std::string(n));
        }
    });
}

}  // namespace shmipam::engine
