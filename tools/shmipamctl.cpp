// shmipamctl: the operator's tool. Reads arenas without locks (never slowing ADDs down), and
// changes state only through the same CAS protocol as the plugin. Exit codes: 0 clean or done,
// 1 violations found (or a dry run found work, or dump-file showed damage), 2 cannot read.
#include <CLI/CLI.hpp>
#include <iostream>

#include "base/build_version.h"
#include "tools/verbs/verbs.h"

SHMIPAM_STAMP_BUILD_VERSION();

using namespace shmipam::tools;

int main(int argc, char** argv) {
    try {
        CLI::App app{"shmipamctl: see, check and repair shmipam's address state on this node"};
        app.require_subcommand(1);
        Options o;
        app.add_option("--run-dir", o.run_dir, "where the arenas live (the ipam runDir)")
            ->capture_default_str();
        auto net = [&](CLI::App* c, bool required = true) {
            auto* opt =
                c->add_option("network", o.network,
                              "network name; pool/<name> or subnet/<name> for a pool mode state");
            if (required) opt->required();
        };
        auto json_flag = [&](CLI::App* c) { c->add_flag("--json", o.json, "print JSON"); };

        auto* ls = app.add_subcommand("ls", "networks, their blocks and utilisation");
        json_flag(ls);
        auto* dump = app.add_subcommand("dump", "every address that is not free, and to whom");
        net(dump);
        json_flag(dump);
        dump->add_option("--state", o.state, "only this state (allocated, cooling, claiming, ...)");
        dump->add_option("--container", o.container, "only containers whose id starts so");
        dump->add_option("--pod", o.pod, "only this pod (namespace/name)");
        dump->add_option("--address", o.address, "only this address");
        auto* verify = app.add_subcommand("verify", "check every invariant of the network's state");
        net(verify);
        json_flag(verify);
        auto* repair = app.add_subcommand(
            "repair",
            "heal what dead invocations left; retire damaged state so it is rebuilt from "
            "the journal (dry run unless --apply)");
        net(repair);
        repair->add_flag("--apply", o.apply, "make the changes");
        auto* release = app.add_subcommand(
            "release",
            "release attachments by address, container or pod, or a fixed-address claim (dry run "
            "unless --apply)");
        net(release, false);
        json_flag(release);
        release->add_option("--address", o.address, "the attachment holding this address");
        release->add_option("--container", o.container, "this container id");
        release->add_option("--ifname", o.ifname, "with --container: only this interface");
        release->add_option("--pod", o.pod, "every attachment of this pod (namespace/name)");
        release->add_option("--claim", o.claim,
                            "the fixed-address claim of this StatefulSet pod or VM "
                            "(namespace/name), in the network given or in every one");
        release->add_flag("--force", o.force,
                          "with --claim: also a claim in use (its pod loses its addresses)");
        release->add_flag("--apply", o.apply, "make the changes");
        auto* claims = app.add_subcommand(
            "claims", "fixed-address claims: who uses them, their policy, when they expire");
        net(claims, false);
        json_flag(claims);
        auto* gc = app.add_subcommand(
            "gc", "release every attachment not in a list of live ones (dry run unless --apply)");
        net(gc);
        json_flag(gc);
        gc->add_option("--valid", o.valid_file,
                       "JSON list of {containerID, ifname}, or - for stdin")
            ->required();
        gc->add_option("--older-than", o.older_than_s,
                       "only attachments older than this (seconds)");
        gc->add_flag("--apply", o.apply, "make the changes");
        auto* stats = app.add_subcommand("stats", "counters and utilisation per block");
        net(stats);
        json_flag(stats);
        auto* metrics =
            app.add_subcommand("metrics", "Prometheus text format, for one network or all of them");
        net(metrics, false);
        auto* textfile = metrics->add_option(
            "--textfile", o.textfile_dir,
            "write <dir>/shmipam.prom atomically (node_exporter textfile collector)");
        metrics
            ->add_option("--every", o.every_s,
                         "with --textfile: rewrite it every this many seconds until stopped")
            ->check(CLI::PositiveNumber)
            ->needs(textfile);
        auto* render = app.add_subcommand("render", "an SVG map of the network's addresses");
        net(render);
        render->add_option("--cidr", o.cidr,
                           "the network's range: blocks not created yet are drawn free");
        auto* dump_file = app.add_subcommand(
            "dump-file",
            "print one state file (index, block, journal segment, checkpoint), damage shown "
            "inline; needs no config or run directory (a file copied into a bug report)");
        dump_file->add_option("path", o.file, "the file")->required();
        json_flag(dump_file);

        auto* explain = app.add_subcommand(
            "explain",
            "pool mode: which pools a pod would get its addresses from and why, without creating "
            "it (exit 1 when an ADD would fail)");
        ExplainOptions& e = o.explain;
        explain->add_option("--config", e.config_file,
                            "a CNI network config file: its poolsDir and pool fields, and the pod "
                            "annotations and labels it carries");
        explain->add_option("--pools-dir", e.pools_dir, "the pools directory");
        explain->add_option("--namespace", e.namespace_, "the pod's namespace")
            ->capture_default_str();
        explain->add_option("--pod", e.pod, "the pod's name");
        explain->add_option("--node", e.node, "the node the pod runs on");
        explain->add_option("--ifname", e.ifname, "the interface being added")
            ->capture_default_str();
        explain->add_option("--annotation", e.annotations, "a pod annotation KEY=VALUE (repeat)");
        explain->add_option("--label", e.labels, "a pod label KEY=VALUE (repeat)");
        explain->add_option("--default-v4", e.default_v4, "default_ipv4_ippool (repeat)");
        explain->add_option("--default-v6", e.default_v6, "default_ipv6_ippool (repeat)");
        explain->add_flag("--clean-gateway", e.clean_gateway, "clean_gateway");
        explain->add_option("--multus-namespace", e.multus_namespace, "multusNamespace");
        explain->add_option("--multus-cluster-network", e.multus_cluster_network,
                            "multusClusterNetwork");
        json_flag(explain);
        auto* cluster = app.add_subcommand(
            "cluster", "cluster mode (docs/cluster.md): blocks in etcd and on this node");
        cluster->require_subcommand(1);
        auto cluster_config = [&](CLI::App* c) {
            c->add_option("--config", o.cluster_config,
                          "the network config (or conflist) whose ipam section has etcd")
                ->required();
            json_flag(c);
        };
        auto* cluster_ls = cluster->add_subcommand(
            "ls",
            "blocks per pool and node as etcd says, beside this node's cache and arenas, with "
            "disagreements flagged (exit 1 when there are some)");
        cluster_config(cluster_ls);
        cluster_ls->add_option("--node", o.node, "this node's name (default: the config's)");
        auto* cluster_gc = cluster->add_subcommand(
            "gc", "release the blocks of nodes that no longer exist (dry run unless --apply)");
        cluster_config(cluster_gc);
        cluster_gc
            ->add_option("--live-nodes", o.live_nodes,
                         "the nodes that exist: a JSON list of names, `kubectl get nodes -o "
                         "json`, or one name per line; - for stdin")
            ->required();
        cluster_gc->add_flag("--apply", o.apply, "make the changes");
        cluster_gc->add_flag("--force", o.force,
                             "also when the list names none of the nodes owning blocks");
        InstallOptions inst;
        auto* install = app.add_subcommand(
            "install",
            "copy the plugin binaries into the CNI bin directory (each by a rename; a newer one "
            "there is kept) and write a conflist unless one of its name is there");
        install->add_option("--cni-bin-dir", inst.cni_bin_dir, "e.g. /opt/cni/bin")->required();
        install->add_option("--cni-conf-dir", inst.cni_conf_dir, "e.g. /etc/cni/net.d")->required();
        install->add_option("--conf", inst.conf, "the conflist to install (its file name kept)");
        install->add_option("--from", inst.from,
                            "where shmipam and shmipam-cluster are (default: beside shmipamctl)");
        install->add_flag("--force", inst.force, "replace a newer plugin (a downgrade)");
        install->add_flag("--overwrite-conf", inst.overwrite_conf,
                          "replace a conflist of the same name that differs");
        try {
            app.parse(argc, argv);
        } catch (const CLI::ParseError& e) {
            return app.exit(e) == 0 ? 0 : kExitCannotRead;
        }
        if (ls->parsed()) return cmd_ls(o);
        if (dump->parsed()) return cmd_dump(o);
        if (verify->parsed()) return cmd_verify(o);
        if (repair->parsed()) return cmd_repair(o);
        if (release->parsed()) return cmd_release(o);
        if (gc->parsed()) return cmd_gc(o);
        if (stats->parsed()) return cmd_stats(o);
        if (metrics->parsed()) return cmd_metrics(o);
        if (render->parsed()) return cmd_render(o);
        if (dump_file->parsed()) return cmd_dump_file(o);
        if (explain->parsed()) return cmd_explain(o);
        if (claims->parsed()) return cmd_claims(o);
        if (cluster_ls->parsed()) return cmd_cluster_ls(o);
        if (cluster_gc->parsed()) return cmd_cluster_gc(o);
        if (install->parsed()) return cmd_install(inst);
        return kExitCannotRead;
    } catch (const std::exception& e) {
        std::cerr << "shmipamctl: " << e.what() << "\n";
        return kExitCannotRead;
    }
}
