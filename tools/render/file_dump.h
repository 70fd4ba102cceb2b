// The renderings of `dump-file`: one state file's header, its non-empty items and a closing
// summary, as text (damage inline, where it is) or JSON (the same, keys in file order).
#pragma once

#include <string>

#include "tools/state_file/read.h"

namespace shmipam::tools {

std::string file_dump_text(const FileDescription& d);
std::string file_dump_json(const FileDescription& d);

}  // namespace shmipam::tools
