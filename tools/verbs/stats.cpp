// shmipamctl stats: one network's counters and its utilisation per range set and block.
#include <CLI/CLI.hpp>
#include <iostream>

#include "engine/inspect/inspect.h"
#include "tools/render/json.h"
#include "tools/render/network_summary.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

int cmd_stats(const CommonOptions& common) {
    auto store = open_network(common.run_dir, common.network, shm::Access::kReadOnly);
    if (!store) return cannot_read(store.error());
    auto d = engine::dump(**store);
    if (!d) return cannot_read(d.error());
    std::cout << (common.json ? json_text(stats_json(*d)) : stats_text(*d));
    return kExitClean;
}

}  // namespace

void register_stats(CLI::App& app, CommonOptions& common, int& exit_code) {
    auto* verb = app.add_subcommand("stats", "counters and utilisation per block");
    add_network_argument(*verb, common);
    add_json_flag(*verb, common);
    verb->callback([&common, &exit_code] { exit_code = cmd_stats(common); });
}

}  // namespace shmipam::tools
