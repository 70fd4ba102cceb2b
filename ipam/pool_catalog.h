// The pools directory as a catalog, through a compiled snapshot: parsing YAML costs an exec'd
// ADD about 0.1 ms per pool object, so the parsed catalog is kept in
// <runDir>/_pools/catalog-<hash of poolsDir> (pools/catalog_codec.h) with the directory's stamp
// (every file's name, size, inode, mtime, ctime), and rebuilt when the stamp differs. A snapshot
// is only a cache: one that does not decode is ignored, one that cannot be written is skipped.
#pragma once

#include <memory>

#include "base/status.h"
#include "ipam/request.h"
#include "pools/catalog.h"

namespace shmipam::ipam {

Expected<std::shared_ptr<const pools::Catalog>> load_catalog(const Request& r);

}  // namespace shmipam::ipam
