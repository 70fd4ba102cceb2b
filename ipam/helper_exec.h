// Running a helper (shmipam-cluster, cluster/helper_protocol.h; shmipam-kube,
// kube/pod_protocol.h): one request on its stdin, one answer on its stdout.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "ipam/pool_config.h"

namespace shmipam::ipam {

// The file `name` in the running binary's directory (the plugin's, or shmipamctl's).
std::string helper_beside_plugin(const std::string& name);
// shmipam-cluster beside the running plugin, unless the config names one.
std::string helper_path(const ClusterMode& cm);

// How a helper is started: through the loader shipped beside it (base/shipped_libraries.h)
// when `path`'s directory has kShippedLibDir/kShippedLoader, else by itself (a helper in a
// build directory, or one a config names, runs on the host's libraries).
struct HelperLaunch {
    std::string file;               // what is exec'd
    std::vector<std::string> argv;  // argv[0] first
    bool through_shipped_loader = false;
};
HelperLaunch helper_launch(const std::string& path);

// Runs the helper with `input` on its stdin and waits for it: its stdout, or why it could not
// run. `lock_fd` (>= 0): the pool lock, held, handed to the helper as its fd 3. `config_key`:
// the config field that names the helper, for the message when it cannot run.
Expected<std::string> run_helper(const std::string& path, const std::string& input,
                                 int lock_fd = -1, const char* config_key = "ipam.clusterHelper");

// Starts the helper in its own session with `input` on stdin, /dev/null for its output, and
// `lock_fd` (held; or -1: the helper waits for the lock) as its fd 3; never waited for: it
// outlives the plugin, and the runtime, which waits for the plugin's output to close, does not
// wait for it.
void spawn_detached(const std::string& path, const std::string& input, int lock_fd);

}  // namespace shmipam::ipam
