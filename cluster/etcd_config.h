// The `etcd` object of a network config (docs/cluster.md, "Configuration") as the client's
// settings: read the same way by the cluster helper and by shmipamctl's cluster verbs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "cluster/etcd_client.h"

namespace shmipam::cluster {

// Code 7 naming the field when the object is not what docs/cluster.md describes.
Expected<EtcdConfig> etcd_config_from_json(const nlohmann::json& etcd);
// Its key prefix ("/shmipam" when not given).
std::string etcd_prefix(const nlohmann::json& etcd);

}  // namespace shmipam::cluster
