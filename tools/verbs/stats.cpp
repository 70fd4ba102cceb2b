// shmipamctl stats: one network's counters and its utilisation per range set and block.
#include <iostream>

#include "engine/inspect/inspect.h"
#include "tools/render/json.h"
#include "tools/render/network_summary.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

int cmd_stats(const Options& o) {
    auto store = open_network(o, shm::Access::kReadOnly);
    if (!store) return cannot_read(store.error());
    auto d = engine::dump(**store);
    if (!d) return cannot_read(d.error());
    std::cout << (o.json ? json_text(stats_json(*d)) : stats_text(*d));
    return kExitClean;
}

}  // namespace shmipam::tools
