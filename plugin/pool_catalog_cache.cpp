#include "plugin/pool_catalog_cache.h"

#include "pools/pool_dir.h"

namespace shmipam::cni {

Expected<std::shared_ptr<const pools::Catalog>> load_catalog(const NetConf& nc) {
    auto c = pools::load_pools_dir(nc.pool_mode->pools_dir);
    if (!c) return c.error();
    return std::shared_ptr<const pools::Catalog>(std::make_shared<pools::Catalog>(std::move(*c)));
}

}  // namespace shmipam::cni
