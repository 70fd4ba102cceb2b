// shmipamctl cluster ls / pass / recover / gc: their subcommands and flags, the same in every
// build so that the image's static shmipamctl, which has no etcd client, answers the cluster
// verbs rather than not knowing them. What they do is cluster.cpp's, cluster_pass.cpp's and
// cluster_recover.cpp's, or cluster_absent.cpp's.
#include <CLI/CLI.hpp>

#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

void add_config_option(CLI::App& verb, std::string& config) {
    verb.add_option("--config", config,
                    "the network config (or conflist) whose ipam section has etcd")
        ->required();
}

}  // namespace

void register_cluster(CLI::App& app, CommonOptions& common, int& exit_code) {
    auto* cluster = app.add_subcommand(
        "cluster",
        "cluster mode (docs/cluster.md): blocks in etcd and on this node: ls, pass, gc, "
        "recover, migrate, drop-pool, purge");
    cluster->require_subcommand(1);

    auto* ls = cluster->add_subcommand(
        "ls",
        "blocks per pool and node as etcd says, beside this node's cache and arenas, with "
        "disagreements flagged (exit 1 when there are some)");
    auto ls_options = std::make_shared<ClusterLsOptions>();
    add_config_option(*ls, ls_options->config);
    add_json_flag(*ls, common);
    ls->add_option("--node", ls_options->node, "this node's name (default: the config's)");
    ls->callback(
        [&common, ls_options, &exit_code] { exit_code = cmd_cluster_ls(common, *ls_options); });

    auto* pass = cluster->add_subcommand(
        "pass",
        "the node pass: bring this node's block caches in line with the store (drop the blocks "
        "taken from it, adopt the ones it lacks) and report; exit 1 when a dropped block still "
        "has addresses in use here");
    auto pass_options = std::make_shared<ClusterPassOptions>();
    add_config_option(*pass, pass_options->config);
    add_json_flag(*pass, common);
    pass->add_option("--every", pass_options->every_s,
                     "run again every this many seconds until stopped (a DaemonSet container, a "
                     "systemd service)");
    pass->add_option("--textfile", pass_options->textfile_dir,
                     "also write what the pass found as shmipam_cluster.prom into this "
                     "directory (the node exporter's textfile collector)");
    pass->callback([&common, pass_options, &exit_code] {
        exit_code = cmd_cluster_pass(common, *pass_options);
    });

    auto* recover = cluster->add_subcommand(
        "recover",
        "after etcd was rebuilt or restored from a snapshot (the store went back in time): "
        "re-create in the store the blocks and fixed claims this node holds, then accept the "
        "store so this node's helpers claim again; refuses conflicts (dry run unless --apply; "
        "exit 1 when there is work or a conflict)");
    auto recover_options = std::make_shared<ClusterRecoverOptions>();
    add_config_option(*recover, recover_options->config);
    add_json_flag(*recover, common);
    recover->add_option("--node", recover_options->node,
                        "this node's name (default: the config's)");
    recover->add_flag("--apply", recover_options->apply, "make the changes");
    recover->callback([&common, recover_options, &exit_code] {
        exit_code = cmd_cluster_recover(common, *recover_options);
    });

    auto* gc = cluster->add_subcommand(
        "gc", "release the blocks of nodes that no longer exist (dry run unless --apply)");
    auto gc_options = std::make_shared<ClusterGcOptions>();
    add_config_option(*gc, gc_options->config);
    add_json_flag(*gc, common);
    gc->add_option("--live-nodes", gc_options->live_nodes,
                   "the nodes that exist: a JSON list of names, `kubectl get nodes -o "
                   "json`, or one name per line; - for stdin")
        ->required();
    gc->add_flag("--apply", gc_options->apply, "make the changes");
    gc->add_option("--claim", gc_options->claim,
                   "also release pod NAMESPACE/NAME's fixed claims held by nodes gone, whatever "
                   "their reclaim policy");
    gc->add_flag("--force", gc_options->force,
                 "also when the list names none of the nodes owning blocks");
    gc->callback(
        [&common, gc_options, &exit_code] { exit_code = cmd_cluster_gc(common, *gc_options); });

    auto* migrate = cluster->add_subcommand(
        "migrate",
        "write the store of an earlier release (the v1 layout) in this release's layout, once "
        "every node runs this release (dry run unless --apply)");
    auto migrate_options = std::make_shared<ClusterMigrateOptions>();
    add_config_option(*migrate, migrate_options->config);
    migrate->add_option("--pool-cidr", migrate_options->pool_cidrs,
                        "NAME=CIDR: the CIDR of a pool that has no v1 meta and no pool file on "
                        "this node (repeatable)");
    migrate->add_flag("--apply", migrate_options->apply, "make the changes");
    migrate->add_flag("--remove-v1", migrate_options->remove_v1,
                      "after the migration: delete the v1 keys (once no node runs a v1 release)");
    migrate->callback([&common, migrate_options, &exit_code] {
        exit_code = cmd_cluster_migrate(common, *migrate_options);
    });

    auto* drop = cluster->add_subcommand(
        "drop-pool",
        "remove a pool from the cluster store (its registration, and what is left of it) once "
        "no block or fixed claim of it is left, to change its CIDR or block size or give its "
        "CIDR to another pool (dry run unless --apply)");
    auto drop_options = std::make_shared<ClusterDropPoolOptions>();
    add_config_option(*drop, drop_options->config);
    drop->add_option("--pool", drop_options->pool, "the pool's name")->required();
    drop->add_flag("--apply", drop_options->apply, "make the changes");
    drop->add_flag("--force",
                   drop_options->force,
                   "also while blocks or fixed claims of the pool are left (only when no node "
                   "uses an address of it)");
    drop->callback([&common, drop_options, &exit_code] {
        exit_code = cmd_cluster_drop_pool(common, *drop_options);
    });

    auto* purge = cluster->add_subcommand(
        "purge",
        "remove every block, fixed claim and record shmipam keeps under the config's etcd "
        "prefix (removing shmipam from a cluster); a dry run unless --confirm repeats the prefix");
    auto purge_options = std::make_shared<ClusterPurgeOptions>();
    add_config_option(*purge, purge_options->config);
    purge->add_option("--live-nodes", purge_options->live_nodes,
                      "the nodes that exist: a JSON list of names, `kubectl get nodes -o "
                      "json`, or one name per line; - for stdin")
        ->required();
    purge->add_option("--confirm", purge_options->confirm,
                      "the prefix again (e.g. /shmipam): what makes it act");
    purge->add_flag("--force", purge_options->force,
                    "also while blocks or fixed claims name nodes in --live-nodes");
    purge->callback([&common, purge_options, &exit_code] {
        exit_code = cmd_cluster_purge(common, *purge_options);
    });
}

}  // namespace shmipam::tools
