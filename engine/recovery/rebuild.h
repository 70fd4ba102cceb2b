// Rebuilding a network's arena from its journal, when the index is missing (a reboot emptied
// the tmpfs run directory, or the arena was lost or retired). Runs on the aside index before it
// is published, so racing rebuilders each build the same state and one of them publishes it.
//
// Replay keeps, per address, the record with the highest slot generation (never journal order:
// reservation by fetch-add means durable records are not a prefix). Then:
//   ALLOC    the attachment holds the address, unless the record is from another boot (its
//            sandbox cannot exist any more: reclaimed) and reclaimOnReboot is on, and it is not
//            a claim's (kEntryFlagClaim: held for a name, not for a sandbox);
//   RELEASE  cooling for what is left of reuseDelay, measured from the release's wall time;
//   ROLLBACK free.
// Every replayed address starts at a generation past the journal's, so records written from now
// on win over the old ones in any later replay.
#pragma once

#include <array>
#include <vector>

#include "engine/recovery/aside_builder.h"
#include "engine/state/network_config.h"
#include "shm/index_file.h"
#include "shm/journal.h"

namespace shmipam::engine {

struct RebuildStats {
    std::vector<format::JournalRecord> newest;  // the winning record of every address
    size_t attachments = 0;
    size_t addresses = 0;
    size_t reclaimed_after_reboot = 0;
    size_t cooling = 0;
    // ROLLBACKs of ALLOCs an attachment's newer ALLOC in the same range set superseded (their
    // addresses are free in the rebuilt state): to be journaled before it is published.
    std::vector<format::JournalRecord> superseded;
};

Expected<RebuildStats> rebuild_from_journal(const NetworkConfig& cfg,
                                            const shm::Journal::ScanResult& scan,
                                            shm::IndexFile& aside, const BlockOpener& open_block,
                                            const std::array<uint8_t, 16>& boot_id,
                                            uint64_t now_unix_ns, uint64_t now_boot_ns);

}  // namespace shmipam::engine
