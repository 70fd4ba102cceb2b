// Human and JSON renderings of the engine's dump and verify reports, for shmipamctl.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "engine/inspect/inspect.h"

namespace shmipam::tools {

nlohmann::json block_json(const engine::BlockView& b);
nlohmann::json dump_to_json(const engine::NetworkDump& d);
std::string dump_to_table(const engine::NetworkDump& d);

nlohmann::json verify_to_json(const engine::VerifyReport& r);
std::string verify_to_text(const engine::VerifyReport& r);

}  // namespace shmipam::tools
