// The store the allocator works over: a network's index file and its block arenas, mapped on
// demand (an ADD touches the index and the one or two blocks it claims from).
#pragma once

#include <array>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/addr/ip_address.h"
#include "engine/slots/block_map.h"
#include "engine/state/index_filler.h"
#include "engine/state/network_config.h"
#include "shm/block_file.h"
#include "shm/index_file.h"
#include "shm/journal.h"
#include "shm/process_identity.h"

namespace shmipam::engine {

class NetworkStore final : public BlockMap {
  public:
    // Opens the network's state as `self`, creating the directory and index on first use
    // (`fill` fills a new index before it is published). Callers use engine::open_network
    // (engine/ops/open_network.h), which hands in recovery's filler.
    static Expected<std::unique_ptr<NetworkStore>> open(const NetworkConfig& cfg,
                                                        const shm::ProcessIdentity& self,
                                                        const IndexFiller& fill);
    // Opens an existing network's state directory (tools); no config needed.
    static Expected<std::unique_ptr<NetworkStore>> open_existing(const std::string& state_dir,
                                                                 shm::Access access);
    // The configured ranges and reuseDelay, as last recorded in the index (display only).
    std::string ranges_text();
    uint64_t reuse_delay_ms();
    // For repairs: the tool acts like an invocation (it may retire damaged state).
    void act_as_invocation() { tool_ = false; }

    // Appends journal records with the intent of the lease this invocation holds (set by the
    // operation holding it), or of a lease taken just for the append (tools), so a concurrent
    // compaction never drops what it writes.
    Status append_journal(std::span<format::JournalRecord> records);
    void set_active_lease(const shm::LeaseHandle* lease) { active_lease_ = lease; }
    // An append of this process reached a segment's compaction check: time to consider it.
    bool compaction_due() const { return compaction_due_; }
    void clear_compaction_due() { compaction_due_ = false; }
    uint64_t journal_max_segments() const { return journal_max_segments_; }

    shm::IndexFile& index() { return index_; }
    shm::Journal& journal() { return *journal_; }
    const std::array<uint8_t, 16>& boot_id() const { return boot_id_; }
    // What the last open did when it created the index (for logs and tests).
    struct Creation {
        bool created = false;
        bool rebuilt = false;
        size_t imported = 0;
        size_t rebuilt_addresses = 0;
        size_t reclaimed_after_reboot = 0;
        bool compacted = false;
    };
    const Creation& creation() const { return creation_; }
    const shm::ProcessIdentity& self() const { return self_; }
    const std::string& dir() const { return dir_; }
    uint8_t block_prefix(Family f) const override;
    Expected<shm::BlockFile*> block_holding(const IpAddress& a, bool create) override {
        return block_for(a, create);
    }

    // The block holding a; nullptr (no error) when it does not exist and create is false.
    // A block created here runs `prefill` on its aside copy before publishing it.
    Expected<shm::BlockFile*> block_for(const IpAddress& a, bool create,
                                        const shm::BlockFile::Prefill& prefill = nullptr);
    IpAddress block_base(const IpAddress& a) const;
    uint64_t slot_of(const IpAddress& a) const { return uint64_t(a.value - block_base(a).value); }

    // Every block file of the network (tools, verify).
    Expected<std::vector<shm::BlockFile*>> all_blocks();

    static std::string block_file_name(const IpAddress& base, int prefix, uint64_t epoch);

    // Retires the network's state (a damaged block was found): marks the index retired, removes
    // it, and returns the error to answer (code 11: the next invocation rebuilds).
    Error retire(const std::string& why);
    // Removes block files of other epochs (earlier indexes, creators that lost the race to
    // publish), only while this store's index is the current one. open() calls it after
    // creating an index; public for the test of a stale creator's cleanup.
    void remove_blocks_of_other_epochs();
    bool retired() { return index_.retired(); }
    // Retired, or no longer the index its name points to (the run directory was removed and the
    // state rebuilt, which flags nothing): work done on it from now on may have missed the
    // rebuild's scan of the journal and must not commit. The check at every commit point.
    bool superseded() { return index_.retired() || !index_.still_published(); }

  private:
    NetworkStore() = default;

    std::string dir_;
    shm::FileIdentity who_;
    shm::ProcessIdentity self_;
    shm::IndexFile index_;
    shm::Access access_ = shm::Access::kReadWrite;
    uint8_t prefix_v4_ = 24;
    uint8_t prefix_v6_ = 120;
    std::map<std::pair<int, u128>, std::unique_ptr<shm::BlockFile>> blocks_;
    uint64_t epoch_ = 0;  // of the index the blocks belong to (format.h)
    std::unique_ptr<shm::Journal> journal_;
    std::array<uint8_t, 16> boot_id_{};
    Creation creation_;

    Status create_index(const NetworkConfig& cfg, const shm::IndexGeometry& g,
                        const IndexFiller& fill);
    void remove_retired_index();
    void remove_blocks_of_other_epochs(const shm::IndexFile& current);  // lock held
    // Whether <dir>/index is, now, the index this store maps (its epoch).
    bool index_at_path_is_ours();
    bool tool_ = false;  // opened by shmipamctl: report damage, never act on it by itself
    const shm::LeaseHandle* active_lease_ = nullptr;  // the lease journal appends name
    bool compaction_due_ = false;
    uint64_t journal_max_segments_ = 0;  // 0: never compact (tools)
    uint64_t open_deadline_ns_ = 0;      // CLOCK_BOOTTIME bound of open(), creation included
};

}  // namespace shmipam::engine
