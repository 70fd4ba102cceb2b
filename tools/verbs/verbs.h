// shmipamctl's verbs (one file each in tools/verbs/), their exit codes, and the helpers they
// share. Each verb file registers its subcommand: its flags, bound to options of its own, and a
// callback that runs it. A verb gathers data and picks a renderer; it never formats output
// itself.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/ops/allocator.h"
#include "engine/state/network_store.h"
#include "tools/render/claims.h"

namespace CLI {
class App;
}

namespace shmipam::tools {

inline constexpr int kExitClean = 0;
inline constexpr int kExitViolations = 1;  // also: "a dry run found work to do", "damage shown"
inline constexpr int kExitCannotRead = 2;

// What most verbs read: the global --run-dir, and the network argument and --json of the verbs
// that have them. One instance, main's: each verb binds its network argument and --json to it,
// and only the verb given on the command line writes them.
struct CommonOptions {
    std::string run_dir = "/run/shmipam";
    std::string network;
    bool json = false;
};

// Adds the verb's subcommand to `app`, its flags bound to `common` and to options of its own,
// and a callback that runs it (after parsing, so with --run-dir read) and sets `exit_code`.
using RegisterVerb = void (*)(CLI::App& app, CommonOptions& common, int& exit_code);

void register_ls(CLI::App& app, CommonOptions& common, int& exit_code);
void register_dump(CLI::App& app, CommonOptions& common, int& exit_code);
void register_verify(CLI::App& app, CommonOptions& common, int& exit_code);
void register_repair(CLI::App& app, CommonOptions& common, int& exit_code);
void register_release(CLI::App& app, CommonOptions& common, int& exit_code);
void register_claims(CLI::App& app, CommonOptions& common, int& exit_code);
void register_gc(CLI::App& app, CommonOptions& common, int& exit_code);
void register_stats(CLI::App& app, CommonOptions& common, int& exit_code);
void register_metrics(CLI::App& app, CommonOptions& common, int& exit_code);
void register_render(CLI::App& app, CommonOptions& common, int& exit_code);
void register_dump_file(CLI::App& app, CommonOptions& common, int& exit_code);
void register_explain(CLI::App& app, CommonOptions& common, int& exit_code);
void register_cluster(CLI::App& app, CommonOptions& common, int& exit_code);
void register_install(CLI::App& app, CommonOptions& common, int& exit_code);
void register_kubeconfig(CLI::App& app, CommonOptions& common, int& exit_code);
void register_uninstall(CLI::App& app, CommonOptions& common, int& exit_code);
void register_states(CLI::App& app, CommonOptions& common, int& exit_code);

// claims' own verbs (claims_create.cpp, claims_transfer.cpp), added to the claims subcommand.
void register_claims_create(CLI::App& claims, CommonOptions& common, int& exit_code);
void register_claims_export(CLI::App& claims, CommonOptions& common, int& exit_code);
void register_claims_import(CLI::App& claims, CommonOptions& common, int& exit_code);

// Every fixed-address claim of common.network, or of every network and pool state under
// common.run_dir (claims.cpp): what shmipamctl claims lists, and what uninstall refuses over.
Expected<std::vector<ClaimRow>> list_claims(const CommonOptions& common);

// release (release.cpp); release --claim is claims.cpp's.
struct ReleaseOptions {
    std::string address, container, ifname, pod;
    std::string claim;   // the fixed-address claim's <namespace>/<name>
    bool force = false;  // with claim: also a claim in use
    bool apply = false;
};
int release_claim(const CommonOptions& common, const ReleaseOptions& o);

// cluster ls and cluster gc: their flags are the same in every build (cluster_command.cpp); what
// they do is cluster.cpp's, or cluster_absent.cpp's in a build without an etcd client.
struct ClusterLsOptions {
    std::string config;  // the network config holding ipam.etcd
    std::string node;    // this node's name, if not the config's nodeName
};
struct ClusterGcOptions {
    std::string config;      // the network config holding ipam.etcd
    std::string live_nodes;  // a file naming the nodes that exist, or - for stdin
    bool apply = false;
    bool force = false;  // also when live_nodes names none of the nodes owning blocks
    std::string claim;   // <namespace>/<pod>: its fixed claims of nodes gone, whatever policy
};
// cluster pass: the node pass (docs/cluster.md, "The node pass").
struct ClusterPassOptions {
    std::string config;  // the network config holding ipam.etcd
    double every_s = 0;  // run again this often until stopped (a DaemonSet container, a timer)
    std::string textfile_dir;  // also write shmipam_cluster.prom there (node exporter)
};
// cluster recover: after the store went back in time (docs/cluster.md).
struct ClusterRecoverOptions {
    std::string config;  // the network config holding ipam.etcd
    std::string node;    // this node's name, if not the config's nodeName
    bool apply = false;
};
int cmd_cluster_ls(const CommonOptions& common, const ClusterLsOptions& o);
int cmd_cluster_recover(const CommonOptions& common, const ClusterRecoverOptions& o);
int cmd_cluster_pass(const CommonOptions& common, const ClusterPassOptions& o);
int cmd_cluster_gc(const CommonOptions& common, const ClusterGcOptions& o);
// cluster migrate: the store from the v1 layout to this release's (docs/cluster.md, "Migrating
// the store").
struct ClusterMigrateOptions {
    std::string config;                   // the network config holding ipam.etcd
    std::vector<std::string> pool_cidrs;  // NAME=CIDR: pools no v1 meta or pool file gives
    bool apply = false;
    bool remove_v1 = false;  // delete the v1 keys (after the migration)
};
int cmd_cluster_migrate(const CommonOptions& common, const ClusterMigrateOptions& o);
// cluster drop-pool: a pool's registration and keys removed from the store, once no block or
// fixed claim of it is left (docs/cluster.md, "Changing a pool's CIDR or block size").
struct ClusterDropPoolOptions {
    std::string config;  // the network config holding ipam.etcd
    std::string pool;
    bool apply = false;
    bool force = false;  // also while blocks or fixed claims of the pool are left
};
int cmd_cluster_drop_pool(const CommonOptions& common, const ClusterDropPoolOptions& o);
// cluster purge: every key of shmipam under the config's prefix removed (removing shmipam from a
// cluster, docs/operations.md).
struct ClusterPurgeOptions {
    std::string config;      // the network config holding ipam.etcd
    std::string live_nodes;  // a file naming the nodes that exist, or - for stdin
    std::string confirm;     // must repeat the prefix: the explicit confirmation
    bool force = false;      // also while blocks or claims name a node in live_nodes
};
int cmd_cluster_purge(const CommonOptions& common, const ClusterPurgeOptions& o);

// ---- shared by the verbs (common.cpp) ----

// Writes `text` to <dir>/<name> for node_exporter's textfile collector (which reads *.prom):
// written aside and renamed into place, so that it never reads half a file.
Status write_textfile(const std::string& dir, const std::string& name, const std::string& text);

// Writes `bytes` to dir/name through a temporary file of its own in dir (mkstemp, so mode 0600
// from the start, then `mode`): written, fsynced, renamed over the old file, the directory
// fsynced. A reader (or an exec) sees the old file or the new one whole, also after a crash.
Status replace_file_atomically(const std::string& dir, const std::string& name,
                               const std::string& bytes, unsigned mode);

// The verb's network argument, bound to common.network.
void add_network_argument(CLI::App& verb, CommonOptions& common, bool required = true);
// --json, bound to common.json.
void add_json_flag(CLI::App& verb, CommonOptions& common);

// A verb's input file, or stdin for "-".
Expected<std::string> read_input(const std::string& path);

// Says what could not be read on stderr; returns kExitCannotRead.
int cannot_read(const Error& e);
int cannot_read(const std::string& message);

// A network name is one path component: no '/', no leading '.' (no "..", no hidden files).
bool valid_network_name(const std::string& n);

// Where a network's state is: <run_dir>/<network>, or for pool mode's states (pool/<name>,
// subnet/<name>) <run_dir>/_pools/ippool_<name> and subnet_<name>.
std::string state_dir_of(const std::string& run_dir, const std::string& network);

// The network under run_dir; kIo when it does not exist.
Expected<std::unique_ptr<engine::NetworkStore>> open_network(const std::string& run_dir,
                                                             const std::string& network,
                                                             shm::Access a);

// The networks under run_dir (directories holding an index), sorted; *error says why not.
std::vector<std::string> networks_under(const std::string& run_dir, std::string* error);

// Prints what release or gc released (with apply) or would release, as JSON with json; a dry
// run that found work exits 1.
int report_released(bool json, bool apply,
                    const Expected<std::vector<engine::ReleasedAttachment>>& r);

}  // namespace shmipam::tools
