// What fills a network's new index (engine/state/index_filler.h): a rebuild from the journal
// when it holds records (after a reboot, or when the arena was lost or retired), else an
// import of host-local's allocation files from the dataDir (a node switched from host-local);
// else nothing (a new network).
#pragma once

#include "engine/state/index_filler.h"
#include "engine/state/network_config.h"

namespace shmipam::engine {

// The filler refers to `cfg`, which must outlive it (it is used within one open).
IndexFiller fill_new_index(const NetworkConfig& cfg);

}  // namespace shmipam::engine
