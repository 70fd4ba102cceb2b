// shmipamctl cluster recover (docs/cluster.md, "The store went back in time"): run on each node
// after etcd was rebuilt from nothing or restored from a snapshot. Bad input (a config that
// cannot be read, a bad node name) and a store that cannot be reached exit 2 before any change;
// a dry run exits 1 when there is something to re-create or accept; --apply exits 1 when a
// conflict (a block or claim the store gives another node) is left. The decisions are
// cluster/node_recover.h's.
#include "tools/render/cluster_recover.h"

#include <iostream>

#include "cluster/etcd_client.h"
#include "cluster/etcd_config.h"
#include "cluster/node_recover.h"
#include "tools/cluster_node_use.h"
#include "tools/cluster_setup.h"
#include "tools/render/json.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

int cmd_cluster_recover(const CommonOptions& common, const ClusterRecoverOptions& o) {
    auto setup = read_setup(o.config, o.node, common.run_dir);
    if (!setup) return cannot_read(setup.error());
    auto cfg = cluster::etcd_config_from_json(setup->etcd);
    if (!cfg) return cannot_read(cfg.error());
    cluster::EtcdClient client(*cfg);
    // The store as it is: this verb is the way out of the cluster id and revision guards, so it
    // does not ask them (the report says what they found); nor does it stamp an empty store.
    cluster::Guards guards{cluster::Guards::ClusterId::kIgnore};
    guards.check_revision_floor = false;
    guards.stamp_schema = false;
    auto store = cluster::GuardedStore::open(client, cluster::etcd_prefix(setup->etcd),
                                             setup->state_dir(), guards);
    if (!store) return cannot_read(store.error());
    const cluster::RecoverNode node{setup->node,
                                    {setup->state_dir(), setup->run_dir + "/_cluster"},
                                    setup->fixed_pools,
                                    cluster::kLockWaitBudgets * cfg->budget_ms};
    NodeStates side(setup->run_dir, setup->data_dir);
    auto report = cluster::recover_node(*store, node, side, o.apply);
    if (!report) return cannot_read(report.error());
    std::cout << (common.json ? json_text(cluster_recover_json(*report, o.apply))
                              : cluster_recover_text(*report, o.apply));
    return report->work_left(o.apply) ? kExitViolations : kExitClean;
}

}  // namespace shmipam::tools
