// What goes into a network's new index before it is published. The state layer orchestrates
// creation (build aside, fill, link, map the winner's); what fills a new index is recovery's
// business (engine/recovery/fill_new_index.h: a rebuild from the journal, else an import of
// host-local's files), handed in by whoever opens the network (engine/ops/open_network.h).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "base/status.h"
#include "engine/addr/ip_address.h"
#include "shm/block_file.h"
#include "shm/format.h"
#include "shm/index_file.h"
#include "shm/journal.h"

namespace shmipam::engine {

// Opens the block holding an address, creating it with `prefill` run on its aside copy.
using BlockOpener =
    std::function<Expected<shm::BlockFile*>(const IpAddress&, const shm::BlockFile::Prefill&)>;

struct FilledIndex {
    bool rebuilt = false;  // from the journal (else: new, or imported from host-local)
    size_t rebuilt_addresses = 0;
    size_t reclaimed_after_reboot = 0;
    size_t skipped_records = 0;  // damaged records the rebuild could not use
    // A rebuild's winning record of every address: the checkpoint its creator publishes.
    std::vector<format::JournalRecord> newest;
    // Records to journal before publishing: allocations that exist nowhere in the journal yet
    // (imports), or a rebuild's ROLLBACKs of superseded allocations.
    std::vector<format::JournalRecord> to_journal;
};

using IndexFiller = std::function<Expected<FilledIndex>(
    const shm::Journal::ScanResult& scan, shm::IndexFile& aside, const BlockOpener& open_block,
    const std::array<uint8_t, 16>& boot_id)>;

}  // namespace shmipam::engine
