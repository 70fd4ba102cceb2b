// The human renderings of the engine's dump and verify reports, for shmipamctl.
#pragma once

#include <string>

#include "engine/inspect/inspect.h"

namespace shmipam::tools {

std::string dump_to_table(const engine::NetworkDump& d);
std::string verify_to_text(const engine::VerifyReport& r);

}  // namespace shmipam::tools
