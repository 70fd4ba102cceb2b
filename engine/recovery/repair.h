// Repairs that write: what shmipamctl repair --apply does beyond healing (engine/recovery/
// recovery.h's sweep).
#pragma once

#include <cstddef>

#include "base/status.h"
#include "engine/state/network_store.h"

namespace shmipam::engine {

// Appends an ALLOC record for every allocated address whose newest journal record is not its
// allocation (verify's "unjournaled-allocation"): the arena is the truth while it exists.
Expected<size_t> rejournal_allocations(NetworkStore& store);

}  // namespace shmipam::engine
