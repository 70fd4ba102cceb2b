// Renderings of networks at a glance: `ls` (every network, its blocks and utilisation) and
// `stats` (one network's counters and utilisation per range and block), as text and JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/inspect/inspect.h"

namespace shmipam::tools {

// One network as `ls` found it: its dump, or why it could not be read.
struct LsRow {
    std::string network;
    std::string error;  // non-empty: unreadable, and `dump` is empty
    engine::NetworkDump dump;
};

nlohmann::json ls_json(const std::vector<LsRow>& rows);
std::string ls_text(const std::vector<LsRow>& rows);

nlohmann::json stats_json(const engine::NetworkDump& d);
std::string stats_text(const engine::NetworkDump& d);

}  // namespace shmipam::tools
