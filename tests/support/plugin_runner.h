// Runs a real binary the way a container runtime does: a fresh process with a CNI environment
// and the config on stdin; collects stdout, stderr and the exit status.
#pragma once

#include <sys/types.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace shmipam::testing {

struct ProcessResult {
    int exit_code = -1;  // -1: killed by a signal
    int signal = 0;
    std::string out;
    std::string err;
    nlohmann::json json() const;  // stdout parsed (null when not JSON)
};

// argv[0] is the binary; env replaces the whole environment (plus PATH).
ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& env, const std::string& input);

// Started asynchronously; wait() collects it. For many concurrent invocations.
class Child {
  public:
    Child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
          const std::string& input);
    ProcessResult wait();
    pid_t pid() const { return pid_; }

  private:
    pid_t pid_ = -1;
    int out_fd_ = -1;
    int err_fd_ = -1;
};

std::map<std::string, std::string> cni_env(const std::string& command,
                                           const std::string& container_id,
                                           const std::string& ifname = "eth0",
                                           const std::string& args = "");

ProcessResult run_plugin(const std::map<std::string, std::string>& env, const std::string& config);
ProcessResult run_ctl(const std::vector<std::string>& args);

// A host-local compatible config for network `name` with state under dir.
nlohmann::json make_config(const std::string& dir, const std::string& name = "testnet",
                           const std::string& version = "1.0.0",
                           const std::string& subnet = "10.10.0.0/24");

}  // namespace shmipam::testing
