// The CNI environment: which command, for which container and interface, validated as the
// reference skel library validates it (so runtimes see the same codes from us as from it).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "base/status.h"

namespace shmipam::cni {

enum class Command { kAdd, kDel, kCheck, kVersion, kGc, kStatus };

using EnvLookup = std::function<std::optional<std::string>(const char*)>;

struct CniEnv {
    Command command = Command::kVersion;
    std::string container_id;
    std::string netns;
    std::string ifname;
    std::string args;  // CNI_ARGS
    std::string path;  // CNI_PATH
};

// Reads and validates the environment for its command. Code 4 for missing or bad variables
// (3 for a missing container id, as skel), code 4 for an unknown command.
Expected<CniEnv> read_env(const EnvLookup& env);

Status validate_container_id(const std::string& id);
Status validate_ifname(const std::string& ifname);

}  // namespace shmipam::cni
