// shmipamctl dump-file PATH: prints one state file on its own (as LevelDB's DumpFile does),
// for a file copied into a bug report as much as one in place. Exit 0: read, no damage;
// 1: damage shown; 2: cannot be read, or what it is cannot be told.
#include <CLI/CLI.hpp>
#include <iostream>

#include "tools/render/file_dump.h"
#include "tools/state_file/read.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

struct DumpFileOptions {
    std::string path;
};

// Reads common.json alone: a file needs no run directory or network.
int cmd_dump_file(const CommonOptions& common, const DumpFileOptions& o) {
    auto d = describe_state_file(o.path);
    if (!d) return cannot_read(d.error());
    std::cout << (common.json ? file_dump_json(*d) : file_dump_text(*d));
    return d->damaged() ? kExitViolations : kExitClean;
}

}  // namespace

void register_dump_file(CLI::App& app, CommonOptions& common, int& exit_code) {
    auto* verb = app.add_subcommand(
        "dump-file",
        "print one state file (index, block, journal segment, checkpoint), damage shown "
        "inline; needs no config or run directory (a file copied into a bug report)");
    auto o = std::make_shared<DumpFileOptions>();
    verb->add_option("path", o->path, "the file")->required();
    add_json_flag(*verb, common);
    verb->callback([&common, o, &exit_code] { exit_code = cmd_dump_file(common, *o); });
}

}  // namespace shmipam::tools
