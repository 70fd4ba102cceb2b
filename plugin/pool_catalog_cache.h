// The pools directory as a catalog, for one invocation.
#pragma once

#include <memory>

#include "base/status.h"
#include "plugin/netconf.h"
#include "pools/catalog.h"

namespace shmipam::cni {

Expected<std::shared_ptr<const pools::Catalog>> load_catalog(const NetConf& nc);

}  // namespace shmipam::cni
