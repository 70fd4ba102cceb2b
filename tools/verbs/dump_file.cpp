// shmipamctl dump-file PATH: prints one state file on its own (as LevelDB's DumpFile does),
// for a file copied into a bug report as much as one in place. Exit 0: read, no damage;
// 1: damage shown; 2: cannot be read, or what it is cannot be told.
#include <iostream>

#include "tools/render/file_dump.h"
#include "tools/state_file/read.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

int cmd_dump_file(const Options& o) {
    auto d = describe_state_file(o.file);
    if (!d) return cannot_read(d.error());
    std::cout << (o.json ? file_dump_json(*d) : file_dump_text(*d));
    return d->damaged() ? kExitViolations : kExitClean;
}

}  // namespace shmipam::tools
