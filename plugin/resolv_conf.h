// resolvConf: a resolv.conf file whose nameservers, domain, search list and options become the
// result's "dns" (host-local's behaviour).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace shmipam::cni {

Expected<nlohmann::json> read_resolv_conf(const std::string& path);

}  // namespace shmipam::cni
