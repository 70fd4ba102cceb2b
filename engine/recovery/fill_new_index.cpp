#include "engine/recovery/fill_new_index.h"

#include "base/clock.h"
#include "engine/recovery/migration.h"
#include "engine/recovery/rebuild.h"

namespace shmipam::engine {

IndexFiller fill_new_index(const NetworkConfig& cfg) {
    return [&cfg](const shm::Journal::ScanResult& scan, shm::IndexFile& aside,
                  const BlockOpener& open_block,
                  const std::array<uint8_t, 16>& boot_id) -> Expected<FilledIndex> {
        FilledIndex out;
        if (!scan.records.empty()) {
            auto stats = rebuild_from_journal(cfg, scan, aside, open_block, boot_id,
                                              base::unix_ns(), base::boot_ns());
            if (!stats) return stats.error();
            out.rebuilt = true;
            out.rebuilt_addresses = stats->addresses;
            out.reclaimed_after_reboot = stats->reclaimed_after_reboot;
            out.skipped_records = scan.invalid;
            out.newest = std::move(stats->newest);
            out.to_journal = std::move(stats->superseded);
            return out;
        }
        if (auto st = import_host_local(cfg, aside, open_block, boot_id, &out.to_journal); !st) {
            return st.error();
        }
        return out;
    };
}

}  // namespace shmipam::engine
