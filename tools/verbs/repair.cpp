// shmipamctl repair: heals what dead invocations left (leases, claims, releases); what healing
// cannot fix (an unreadable index or block, a damaged word) is retired so that the next
// invocation rebuilds it from the journal. A dry run unless --apply.
#include "engine/recovery/repair.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>

#include "engine/inspect/inspect.h"
#include "engine/recovery/recovery.h"
#include "shm/file_system.h"
#include "tools/render/repair.h"
#include "tools/render/text.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

// The index cannot be opened at all: move it aside (never delete evidence) so a rebuild starts.
int set_index_aside(const std::string& index_path, const Error& why, bool apply) {
    std::cout << repair_index_unusable(why.msg, apply);
    if (!apply) return kExitViolations;
    const std::string aside = index_path + ".damaged." + std::to_string(::time(nullptr));
    if (shm::file_system().rename(index_path, aside) != 0) {
        return cannot_read("cannot move " + index_path + ": " + std::strerror(errno));
    }
    return kExitClean;
}

struct RepairOptions {
    bool apply = false;
};

int cmd_repair(const CommonOptions& common, const RepairOptions& o) {
    const bool apply = o.apply;
    if (!valid_network_name(common.network)) {
        return cannot_read("invalid network name \"" + common.network + "\"");
    }
    const std::string dir = state_dir_of(common.run_dir, common.network);
    auto store = engine::NetworkStore::open_existing(dir, shm::Access::kReadWrite);
    if (!store) {
        const Code c = store.error().code;
        if (c != Code::kArenaDamaged && c != Code::kArenaVersion && c != Code::kArenaForeign) {
            return cannot_read(store.error());
        }
        return set_index_aside(dir + "/" + shm::IndexFile::kFileName, store.error(), apply);
    }
    auto blocks = (*store)->all_blocks();
    if (!blocks) {
        std::cout << repair_block_unusable(blocks.error().msg, apply);
        if (!apply) return kExitViolations;
        (*store)->act_as_invocation();
        (void)(*store)->retire("shmipamctl repair: " + blocks.error().msg);
        return kExitClean;
    }
    auto before = engine::verify(**store);
    if (!before) return cannot_read(before.error());
    std::cout << repair_found(before->violations);
    if (!apply) {
        std::cout << repair_dry_run_verdict(before->violations.empty());
        return before->violations.empty() ? kExitClean : kExitViolations;
    }
    (*store)->act_as_invocation();
    auto swept = engine::sweep(**store);
    if (!swept) return cannot_read(swept.error());
    auto rejournaled = engine::rejournal_allocations(**store);
    if (!rejournaled) return cannot_read(rejournaled.error());
    std::cout << repair_healed(*rejournaled, *swept);
    auto after = engine::verify(**store);
    if (!after) return cannot_read(after.error());
    if (!after->violations.empty()) {
        // What the sweep cannot heal (a damaged word, a duplicate) the journal can: retire the
        // state; the next invocation rebuilds it from the journal.
        (void)(*store)->retire("shmipamctl repair: " + after->violations.front().kind);
        std::cout << repair_retired_after_healing(after->violations.size());
        return kExitClean;
    }
    std::cout << verify_to_text(*after);
    return kExitClean;
}

}  // namespace

void register_repair(CLI::App& app, CommonOptions& common, int& exit_code) {
    auto* verb = app.add_subcommand(
        "repair",
        "heal what dead invocations left; retire damaged state so it is rebuilt from "
        "the journal (dry run unless --apply)");
    add_network_argument(*verb, common);
    auto o = std::make_shared<RepairOptions>();
    verb->add_flag("--apply", o->apply, "make the changes");
    verb->callback([&common, o, &exit_code] { exit_code = cmd_repair(common, *o); });
}

}  // namespace shmipam::tools
