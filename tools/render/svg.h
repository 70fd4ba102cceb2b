// An SVG map of a network's address space, for a person who would rather look than read: one
// cell per address (blocks as 16-column grids), or one cell per block when the network is
// large, coloured by state, with a legend and a hover title naming the owner.
#pragma once

#include <string>

#include "engine/inspect/inspect.h"

namespace shmipam::tools {

inline constexpr size_t kMaxCellsPerAddress = 16384;  // beyond this, one cell per block

std::string render_svg(const engine::NetworkDump& d);

}  // namespace shmipam::tools
