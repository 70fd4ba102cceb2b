// shmipamctl ls: every network under the run directory, its blocks and utilisation. A network
// that cannot be read is listed as such rather than hiding the others.
#include <iostream>

#include "engine/inspect/inspect.h"
#include "tools/render/json.h"
#include "tools/render/network_summary.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

int cmd_ls(const Options& o) {
    std::string err;
    const auto names = networks_under(o.run_dir, &err);
    if (!err.empty()) return cannot_read(err);
    std::vector<LsRow> rows;
    for (const auto& n : names) {
        LsRow row{n, {}, {}};
        Options one = o;
        one.network = n;
        if (auto store = open_network(one, shm::Access::kReadOnly); !store) {
            row.error = store.error().msg;
        } else if (auto d = engine::dump(**store); !d) {
            row.error = d.error().msg;
        } else {
            row.dump = std::move(*d);
        }
        rows.push_back(std::move(row));
    }
    std::cout << (o.json ? json_text(ls_json(rows)) : ls_text(rows));
    return kExitClean;
}

}  // namespace shmipam::tools
