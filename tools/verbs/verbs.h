// shmipamctl's verbs (one file each in tools/verbs/), their options and exit codes, and the
// helpers they share. A verb gathers data and picks a renderer; it never formats output itself.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/ops/allocator.h"
#include "engine/state/network_store.h"

namespace shmipam::tools {

inline constexpr int kExitClean = 0;
inline constexpr int kExitViolations = 1;  // also: "a dry run found work to do", "damage shown"
inline constexpr int kExitCannotRead = 2;

// explain: the pod's facts and the config's pool fields (or --config, a network config file).
struct ExplainOptions {
    std::string config_file, pools_dir, namespace_ = "default", pod, node, ifname = "eth0";
    std::vector<std::string> annotations, labels, default_v4, default_v6;
    bool clean_gateway = false;
    std::string multus_namespace, multus_cluster_network;
};

// install (install.cpp): the plugin binaries and a conflist onto a node, as an install
// container does.
struct InstallOptions {
    std::string from;  // where the binaries are (default: beside shmipamctl)
    std::string cni_bin_dir, cni_conf_dir, conf;
    bool force = false;           // replace a newer plugin
    bool overwrite_conf = false;  // replace a conflist that differs
};

struct Options {
    std::string run_dir = "/run/shmipam";
    std::string network;
    bool json = false;
    bool apply = false;
    // dump filters
    std::string state, container, pod, address;
    // release / gc
    std::string ifname;
    std::string claim;  // release --claim <namespace>/<name>
    bool force = false;
    std::string valid_file;
    double older_than_s = 0;
    // metrics
    std::string textfile_dir;
    double every_s = 0;  // with textfile_dir: rewrite it this often until stopped
    // render
    std::string cidr;
    // dump-file
    std::string file;
    ExplainOptions explain;
    // cluster ls / gc
    std::string cluster_config;  // the network config holding ipam.etcd
    std::string node;            // this node's name, if not the config's nodeName
    std::string live_nodes;      // gc: the names of the nodes that exist
};

int cmd_ls(const Options& o);
int cmd_dump(const Options& o);
int cmd_verify(const Options& o);
int cmd_repair(const Options& o);
int cmd_release(const Options& o);
int cmd_gc(const Options& o);
int cmd_stats(const Options& o);
int cmd_metrics(const Options& o);
int cmd_render(const Options& o);
int cmd_dump_file(const Options& o);
int cmd_explain(const Options& o);
int cmd_claims(const Options& o);
int cmd_cluster_ls(const Options& o);
int cmd_cluster_gc(const Options& o);
int cmd_install(const InstallOptions& o);
// release --claim (claims.cpp).
int release_claim(const Options& o);

// ---- shared by the verbs (common.cpp) ----

// A verb's input file, or stdin for "-".
Expected<std::string> read_input(const std::string& path);

// Says what could not be read on stderr; returns kExitCannotRead.
int cannot_read(const Error& e);
int cannot_read(const std::string& message);

// A network name is one path component: no '/', no leading '.' (no "..", no hidden files).
bool valid_network_name(const std::string& n);

// Where o.network's state is: <run_dir>/<network>, or for pool mode's states (pool/<name>,
// subnet/<name>) <run_dir>/_pools/ippool_<name> and subnet_<name>.
std::string state_dir_of(const Options& o);

// The network o.network under o.run_dir; kIo when it does not exist.
Expected<std::unique_ptr<engine::NetworkStore>> open_network(const Options& o, shm::Access a);

// The networks under run_dir (directories holding an index), sorted; *error says why not.
std::vector<std::string> networks_under(const std::string& run_dir, std::string* error);

// Prints what release or gc released (or would); a dry run that found work exits 1.
int report_released(const Options& o, const Expected<std::vector<engine::ReleasedAttachment>>& r);

}  // namespace shmipam::tools
