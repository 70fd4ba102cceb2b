// Taking over a node from host-local: its allocation files in <dataDir>/<network>/ (one file
// per address, named by the address, holding "containerID\r\nifname") become committed
// attachments when the network's index is first created, so no live pod's address is handed out
// again; last_reserved_ip.N sets range set N's cursor so allocation order carries on.
#pragma once

#include <array>
#include <functional>
#include <vector>

#include "engine/recovery/aside_builder.h"
#include "engine/addr/ip_address.h"
#include "engine/state/network_config.h"
#include "shm/block_file.h"
#include "shm/index_file.h"

namespace shmipam::engine {

// Runs on the index while it is still aside (unpublished). The blocks holding imported
// addresses are built aside too, so an importer that loses the race to publish the index never
// writes to a shared file. Deterministic for a given directory: racing first callers build
// identical state. Addresses outside every range are skipped.
// Each imported address is also returned as an ALLOC journal record (boot_id: this boot's).
Status import_host_local(const NetworkConfig& cfg, shm::IndexFile& aside,
                         const BlockOpener& open_block, const std::array<uint8_t, 16>& boot_id,
                         std::vector<format::JournalRecord>* imported);

}  // namespace shmipam::engine
