// Pool mode (`ipam.poolsDir`): the CNI commands over Spiderpool-style pools. The pools/ rules
// pick the candidate pools; each pool (and each subnet a subnet annotation allocates from) has
// its own state, shared by every network config that selects it: <runDir>/_pools/ippool_<name>
// and <dataDir>/_pools/ippool_<name> (subnet_<name> for subnets). docs/pools.md.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/addr/ip_address.h"
#include "plugin/cni_args.h"
#include "plugin/commands.h"
#include "plugin/netconf.h"

namespace shmipam::cni {

Invocation run_pool_command(const CniEnv& env, const NetConf& nc, const std::string& version,
                            const std::vector<engine::IpAddress>& requested, const CniArgs& args,
                            const nlohmann::json& dns);

}  // namespace shmipam::cni
