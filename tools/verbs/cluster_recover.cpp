// shmipamctl cluster recover (docs/cluster.md, "The store went back in time"): run on each node
// after etcd was rebuilt from nothing or restored from a snapshot. Bad input (a config that
// cannot be read, a bad node name) and a store that cannot be reached exit 2 before any change;
// a dry run exits 1 when there is something to re-create or accept; --apply exits 1 when a
// conflict (a block or claim the store gives another node) is left.
#include "tools/cluster_recover.h"

#include <iostream>

#include "tools/cluster_setup.h"
#include "tools/render/cluster_recover.h"
#include "tools/render/json.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

int cmd_cluster_recover(const CommonOptions& common, const ClusterRecoverOptions& o) {
    auto setup = read_setup(o.config, o.node, common.run_dir);
    if (!setup) return cannot_read(setup.error());
    auto report = recover_node(*setup, o.apply);
    if (!report) return cannot_read(report.error());
    std::cout << (common.json ? json_text(cluster_recover_json(*report, o.apply))
                              : cluster_recover_text(*report, o.apply));
    return report->work_left(o.apply) ? kExitViolations : kExitClean;
}

}  // namespace shmipam::tools
