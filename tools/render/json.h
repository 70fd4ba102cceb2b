// The JSON renderings of the engine's dump and verify reports, and how every verb prints JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "engine/inspect/inspect.h"

namespace shmipam::tools {

nlohmann::json block_json(const engine::BlockView& b);
nlohmann::json dump_to_json(const engine::NetworkDump& d);
nlohmann::json verify_to_json(const engine::VerifyReport& r);

// Every verb's JSON is printed so: two-space indent, one trailing newline.
std::string json_text(const nlohmann::json& j);

}  // namespace shmipam::tools
