// Compacting the journal while invocations append to it (docs/claim-protocol.md, "Compaction").
//
// Appenders reserve records by fetch-add, so at any moment some reserved records may not be
// written yet. Each appender publishes an intent (the tail it saw, in its lease) before it
// reserves; the compactor reads the tail first and then every live intent, and compacts only
// below the lowest of them, rounded down to a segment: every record there is written, or its
// writer is dead and never will. The checkpoint is written aside and published before the
// segments it covers are dropped, so a crash anywhere leaves a readable journal.
#pragma once

#include <cstdint>
#include <optional>

#include "engine/state/network_store.h"

namespace shmipam::engine {

struct Compaction {
    uint64_t covered = 0;  // records [0, covered) are now in the checkpoint
    size_t records = 0;    // records the checkpoint holds (one per address)
};

// The highest segment-aligned sequence below which no record is still being written.
uint64_t compaction_boundary(NetworkStore& store);

// Compacts when more than max_segments segments are past the newest checkpoint and the boundary
// allows it; nullopt when there was nothing to do.
Expected<std::optional<Compaction>> compact_journal(NetworkStore& store, uint64_t max_segments);

// What an operation calls when it is done (lease released): compacts if one of its appends
// reached a segment's compaction check (a quarter into it). Best effort: a failed compaction leaves
// the journal as it was.
void compact_journal_if_due(NetworkStore& store);

}  // namespace shmipam::engine
