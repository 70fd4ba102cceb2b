#include "engine/state/network_store.h"

#include <dirent.h>
#include <linux/magic.h>
#include <sys/statfs.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "shm/atomic_word.h"
#include "base/clock.h"
#include "base/fault_point.h"

namespace shmipam::engine {

namespace {

constexpr uint64_t kMinEntries = 1024;
constexpr uint64_t kMaxEntries = uint64_t{1} << 17;

// Room for every attachment the ranges can serve at a load factor of at most 0.8.
uint64_t entries_for(const NetworkConfig& cfg) {
    u128 need = ~u128{0};
    for (const auto& set : cfg.range_sets) need = std::min(need, usable_count(set));
    need = need + need / 4;
    uint64_t n = kMinEntries;
    while (n < kMaxEntries && u128{n} < need) n <<= 1;
    return n;
}

}  // namespace

uint8_t NetworkStore::block_prefix(Family f) const {
    return f == Family::kV4 ? prefix_v4_ : prefix_v6_;
}

IpAddress NetworkStore::block_base(const IpAddress& a) const {
    Cidr c{a, block_prefix(a.family)};
    return c.network();
}

std::string NetworkStore::block_file_name(const IpAddress& base, int prefix, uint64_t epoch) {
    std::string s = base.to_string();
    std::replace(s.begin(), s.end(), ':', '-');  // keep names friendly to every tool
    char e[24];
    std::snprintf(e, sizeof e, ".%016llx", (unsigned long long)epoch);
    return s + "_" + std::to_string(prefix) + e + ".blk";
}

namespace {

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

void record_config(format::IndexHeader& h, const NetworkConfig& cfg);

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
    s->boot_id_ = shm::read_boot_id(cfg.boot_id_path.c_str());
    shm::IndexGeometry g{entries_for(cfg), cfg.block_prefix_v4, cfg.block_prefix_v6};
    const std::string index_path = s->dir_ + "/" + shm::IndexFile::kFileName;
    for (int attempt = 0;; ++attempt) {
        if (!shm::file_exists(index_path)) {
            if (auto st = s->create_index(cfg, g, fill); !st) return st.error();
        }
        auto index = shm::IndexFile::open_existing(index_path, shm::Access::kReadWrite, &s->who_);
        if (!index) {
            if (index.error().code == Code::kIo && !shm::file_exists(index_path) && attempt < 3) {
                continue;  // retired and removed between our two looks: rebuild
            }
            return index.error();
        }
        s->index_ = std::move(*index);
        // An index from another boot (a run directory that is not tmpfs survived a reboot) holds
        // sandboxes that cannot exist any more: retire it, and the rebuild reclaims them.
        const bool other_boot =
            std::memcmp(s->index_.header().boot_id, s->boot_id_.data(), 16) != 0;
        if (other_boot) s->index_.retire();
        if (!s->index_.retired() || attempt >= 3) break;
        s->remove_retired_index();
    }
    s->journal_->set_names_durable_word(&s->index_.header().journal_names_durable);
    if (s->index_.header().epoch != s->epoch_) {
        s->blocks_.clear();  // another creator's index won: its blocks are the ones
        s->epoch_ = s->index_.header().epoch;
    }
    if (s->creation_.created) {
        s->remove_blocks_of_other_epochs();
        // The creator whose rebuilt index was published (its epoch is the one mapped) compacts
        // what it replayed: a checkpoint of the newest record per address, then the old
        // segments go. Appends from now on are past what it covers.
        if (s->creation_.rebuilt && s->index_.header().epoch == s->epoch_) {
            const bool sync = s->journal_->mode() != shm::SyncMode::kNone;
            s->creation_.compacted = bool(shm::Journal::compact(
                cfg.journal_dir(), s->pending_covered_, s->pending_checkpoint_, sync));
        }
        s->pending_checkpoint_.clear();
    }
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

std::string describe_ranges(const NetworkConfig& cfg) {
    std::string s;
    for (size_t i = 0; i < cfg.range_sets.size(); ++i) {
        if (i) s += " ; ";
        for (size_t k = 0; k < cfg.range_sets[i].size(); ++k) {
            if (k) s += ", ";
            const Range& r = cfg.range_sets[i][k];
            s += r.subnet.to_string() + " [" + r.start.to_string() + "-" + r.end.to_string() + "]";
        }
    }
    return s.substr(0, format::kRangesTextBytes - 1);
}

}  // namespace

// Display fields: a seqlock, so a reader never shows a torn text; written only on change, so the
// claim path pays one comparison.
void record_config(format::IndexHeader& h, const NetworkConfig& cfg) {
    if (shm::load_word(h.reuse_delay_ms, std::memory_order_relaxed) != cfg.reuse_delay_ms) {
        shm::store_word(h.reuse_delay_ms, cfg.reuse_delay_ms, std::memory_order_relaxed);
    }
    const std::string text = describe_ranges(cfg);
    if (std::strncmp(h.ranges_text, text.c_str(), sizeof h.ranges_text) == 0) return;
    uint64_t seq = shm::load_word(h.ranges_seq);
    if (seq % 2 == 1 || !shm::cas_word(h.ranges_seq, seq, seq + 1)) return;  // someone else is
    std::memset(h.ranges_text, 0, sizeof h.ranges_text);
    std::memcpy(h.ranges_text, text.data(), text.size());
    shm::store_word(h.ranges_seq, seq + 2);
}

std::string NetworkStore::ranges_text() {
    const auto& h = index_.header();
    for (int attempt = 0; attempt < 100; ++attempt) {
        const uint64_t s1 = shm::load_word(h.ranges_seq);
        if (s1 % 2 == 1) continue;
        std::string t(h.ranges_text, strnlen(h.ranges_text, sizeof h.ranges_text));
        std::atomic_thread_fence(std::memory_order_acquire);
        if (shm::load_word(h.ranges_seq) == s1) return t;
    }
    return "";
}

uint64_t NetworkStore::reuse_delay_ms() {
    return shm::load_word(index_.header().reuse_delay_ms);
}

void NetworkStore::remove_retired_index() {
    // Only a retired index is ever removed, and unlinking is safe under processes that map it:
    // their mappings stay valid, and they see the retired flag at their next check.
    if (!index_.retired()) return;
    ::unlink((dir_ + "/" + shm::IndexFile::kFileName).c_str());
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
    // `fill` does). Built aside; whoever links it first wins and everyone maps the winner's.
    auto scan = shm::Journal::scan(cfg.journal_dir());
    if (!scan) return scan.error();
    auto open_block = [this](const IpAddress& a, const shm::BlockFile::Prefill& prefill) {
        return block_for(a, true, prefill);
    };
    auto created = shm::IndexFile::open_or_create(
        dir_, g, who_, boot_id_, [&](shm::IndexFile& aside) -> Status {
            epoch_ = aside.header().epoch;
            blocks_.clear();
            aside.header().journal_tail = scan->next_sequence;
            creation_.created = true;
            auto filled = fill(*scan, aside, open_block, boot_id_);
            if (!filled) return filled.error();
            if (filled->rebuilt) {
                creation_.rebuilt = true;
                creation_.rebuilt_addresses = filled->rebuilt_addresses;
                creation_.reclaimed_after_reboot = filled->reclaimed_after_reboot;
                aside.header().reboot_reclaims = filled->reclaimed_after_reboot;
                pending_checkpoint_ = std::move(filled->newest);
                pending_covered_ = scan->next_sequence;
                return Ok{};
            }
            creation_.imported = filled->to_journal.size();
            if (filled->to_journal.empty()) return Ok{};
            // Imports outlive the arena like any allocation: journal them before publishing.
            // Nobody else sees the aside index: no intent needed.
            return journal_->append(aside.header().journal_tail, filled->to_journal,
                                    shm::JournalIntent{});
        });
    if (!created) return created.error();
    return Ok{};
}

Status NetworkStore::append_journal(std::span<format::JournalRecord> records) {
    auto& leases = index_.leases();
    auto append = [&](const shm::LeaseHandle& h) {
        auto st = journal_->append(index_.header().journal_tail, records,
                                   shm::JournalIntent{&leases.intent_word(h.index), h.gen16()});
        if (journal_->reached_compaction_check()) compaction_due_ = true;
        return st;
    };
    if (active_lease_ != nullptr) return append(*active_lease_);
    auto lease = leases.acquire(self_);
    if (!lease) return lease.error();
    auto st = append(*lease);
    leases.release(*lease);
    return st;
}

void NetworkStore::remove_blocks_of_other_epochs() {
    // Blocks of an index that no longer exists (before a rebuild) or that lost the race to be
    // published: nobody will ever map them again by name. Unlinking is safe even if a process
    // still maps one (its mapping stays valid; it is of a retired state).
    DIR* d = ::opendir(dir_.c_str());
    if (d == nullptr) return;
    char mine[32];
    std::snprintf(mine, sizeof mine, ".%016llx.blk", (unsigned long long)epoch_);
    while (dirent* ent = ::readdir(d)) {
        const std::string n = ent->d_name;
        if (n.size() > 4 && n.compare(n.size() - 4, 4, ".blk") == 0 && n[0] != '.' &&
            n.find(mine) == std::string::npos) {
            ::unlink((dir_ + "/" + n).c_str());
        }
    }
    ::closedir(d);
}

Expected<std::unique_ptr<NetworkStore>> NetworkStore::open_existing(const std::string& state_dir,
                                                                    shm::Access access) {
    std::unique_ptr<NetworkStore> s(new NetworkStore());
    s->dir_ = state_dir;
    s->access_ = access;
    auto index =
        shm::IndexFile::open_existing(state_dir + "/" + shm::IndexFile::kFileName, access, nullptr);
    if (!index) return index.error();
    s->index_ = std::move(*index);
    const auto& h = s->index_.header();
    s->who_ = shm::FileIdentity{shm::read_fixed(h.data_dir, sizeof h.data_dir),
                                shm::read_fixed(h.network, sizeof h.network)};
    s->prefix_v4_ = h.block_prefix_v4;
    s->prefix_v6_ = h.block_prefix_v6;
    s->epoch_ = h.epoch;
    s->journal_ = std::make_unique<shm::Journal>(s->who_.data_dir + "/" + s->who_.network,
                                                 shm::SyncMode::kFdatasync);
    s->journal_->set_names_durable_word(&s->index_.header().journal_names_durable);
    s->self_ = shm::current_process();
    s->boot_id_ = shm::read_boot_id();
    s->tool_ = true;
    return s;
}

Expected<shm::BlockFile*> NetworkStore::block_for(const IpAddress& a, bool create,
                                                  const shm::BlockFile::Prefill& prefill) {
    const IpAddress base = block_base(a);
    const auto key = std::make_pair(int(base.family), base.value);
    if (auto it = blocks_.find(key); it != blocks_.end()) return it->second.get();
    const int prefix = block_prefix(a.family);
    const std::string name = block_file_name(base, prefix, epoch_);
    shm::BlockGeometry g;
    g.family = uint8_t(a.family);
    g.prefix = uint8_t(prefix);
    g.base = base.to_bytes();
    Expected<shm::BlockFile> b = [&]() -> Expected<shm::BlockFile> {
        if (create) return shm::BlockFile::open_or_create(dir_, name, g, who_, prefill);
        const std::string path = dir_ + "/" + name;
        if (!shm::file_exists(path)) return make_error(Code::kOk, "absent");
        auto opened = shm::BlockFile::open_existing(path, access_, &who_);
        if (opened && opened->geometry().base != g.base) {
            return make_error(Code::kArenaForeign, "block file holds another block: " + path);
        }
        return opened;
    }();
    if (!b) {
        if (b.error().code == Code::kOk) return static_cast<shm::BlockFile*>(nullptr);
        const Code c = b.error().code;
        const bool damaged =
            c == Code::kArenaDamaged || c == Code::kArenaVersion || c == Code::kArenaForeign;
        // A block of this index that cannot be trusted: never repaired in place under others.
        if (damaged && access_ == shm::Access::kReadWrite && !tool_) return retire(b.error().msg);
        return b.error();
    }
    auto owned = std::make_unique<shm::BlockFile>(std::move(*b));
    shm::BlockFile* raw = owned.get();
    blocks_.emplace(key, std::move(owned));
    return raw;
}

Expected<std::vector<shm::BlockFile*>> NetworkStore::all_blocks() {
    DIR* d = ::opendir(dir_.c_str());
    if (d == nullptr) return make_error(Code::kIo, "cannot read directory " + dir_);
    std::vector<std::string> names;
    char mine[32];
    std::snprintf(mine, sizeof mine, ".%016llx.blk", (unsigned long long)epoch_);
    while (dirent* ent = ::readdir(d)) {
        std::string n = ent->d_name;
        // Only this index's blocks (others are of an earlier or a losing index).
        if (n.size() > 4 && n[0] != '.' && n.find(mine) != std::string::npos &&
            n.compare(n.size() - std::strlen(mine), std::strlen(mine), mine) == 0) {
            names.push_back(n);
        }
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    std::vector<shm::BlockFile*> out;
    for (const auto& n : names) {
        auto b = shm::BlockFile::open_existing(dir_ + "/" + n, access_, &who_);
        if (!b) return b.error();
        const auto g = b->geometry();
        const IpAddress base = IpAddress::from_bytes(Family(g.family), g.base);
        const auto key = std::make_pair(int(base.family), base.value);
        auto it = blocks_.find(key);
        if (it == blocks_.end()) {
            it = blocks_.emplace(key, std::make_unique<shm::BlockFile>(std::move(*b))).first;
        }
        out.push_back(it->second.get());
    }
    std::sort(out.begin(), out.end(), [](shm::BlockFile* x, shm::BlockFile* y) {
        auto gx = x->geometry(), gy = y->geometry();
        return std::make_pair(gx.family, gx.base) < std::make_pair(gy.family, gy.base);
    });
    return out;
}

}  // namespace shmipam::engine
