// shmipamctl ls: every network under the run directory, its blocks and utilisation. A network
// that cannot be read is listed as such rather than hiding the others.
#include <CLI/CLI.hpp>
#include <iostream>

#include "engine/inspect/inspect.h"
#include "tools/render/json.h"
#include "tools/render/network_summary.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

int cmd_ls(const CommonOptions& common) {
    std::string err;
    const auto names = networks_under(common.run_dir, &err);
    if (!err.empty()) return cannot_read(err);
    std::vector<LsRow> rows;
    for (const auto& n : names) {
        LsRow row{n, {}, {}};
        if (auto store = open_network(common.run_dir, n, shm::Access::kReadOnly); !store) {
            row.error = store.error().msg;
        } else if (auto d = engine::dump(**store); !d) {
            row.error = d.error().msg;
        } else {
            row.dump = std::move(*d);
        }
        rows.push_back(std::move(row));
    }
    std::cout << (common.json ? json_text(ls_json(rows)) : ls_text(rows));
    return kExitClean;
}

}  // namespace

void register_ls(CLI::App& app, CommonOptions& common, int& exit_code) {
    auto* verb = app.add_subcommand("ls", "networks, their blocks and utilisation");
    add_json_flag(*verb, common);
    verb->callback([&common, &exit_code] { exit_code = cmd_ls(common); });
}

}  // namespace shmipam::tools
