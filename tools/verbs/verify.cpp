// shmipamctl verify: checks every invariant of a network's state without changing it.
#include <CLI/CLI.hpp>
#include <iostream>

#include "engine/inspect/inspect.h"
#include "tools/render/json.h"
#include "tools/render/text.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

int cmd_verify(const CommonOptions& common) {
    auto store = open_network(common.run_dir, common.network, shm::Access::kReadOnly);
    if (!store) return cannot_read(store.error());
    auto rep = engine::verify(**store);
    if (!rep) return cannot_read(rep.error());
    std::cout << (common.json ? json_text(verify_to_json(*rep)) : verify_to_text(*rep));
    return rep->violations.empty() ? kExitClean : kExitViolations;
}

}  // namespace

void register_verify(CLI::App& app, CommonOptions& common, int& exit_code) {
    auto* verb = app.add_subcommand("verify", "check every invariant of the network's state");
    add_network_argument(*verb, common);
    add_json_flag(*verb, common);
    verb->callback([&common, &exit_code] { exit_code = cmd_verify(common); });
}

}  // namespace shmipam::tools
