// What `repair` says at each step: what it found, what it did (or would do), what is left.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/inspect/inspect.h"
#include "engine/recovery/recovery.h"

namespace shmipam::tools {

// The index cannot be opened: it is (or would be) moved aside for a rebuild from the journal.
std::string repair_index_unusable(const std::string& why, bool applied);
// A block cannot be opened: the network's state is (or would be) retired.
std::string repair_block_unusable(const std::string& why, bool applied);
std::string repair_found(const std::vector<engine::Violation>& violations);
std::string repair_dry_run_verdict(bool nothing_to_do);
std::string repair_healed(uint64_t rejournaled, const engine::SweepReport& swept);
std::string repair_retired_after_healing(size_t violations_left);

}  // namespace shmipam::tools
