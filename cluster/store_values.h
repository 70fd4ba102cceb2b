// Every value under the store's prefix checked against the schema (docs/cluster.md, "Values
// that are not what their key says"): what a node reads of the store is read field by field and
// a value that is not what its key says is skipped, never read with defaults; this names those
// values for the operator (`shmipamctl cluster ls` lists them and exits 1).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/kv_store.h"

namespace shmipam::cluster {

// The keys under <prefix>/v2/pools/ and <prefix>/v2/cidrs/ whose value is not what the key says
// (a field missing or of another type, a key that does not parse, a block of another size than
// its pool's registration or outside it, a key of no known kind), in key order. `pool_kvs`:
// everything under <prefix>/v2/pools/ as the caller read it (the CIDR records are read here).
Expected<std::vector<std::string>> unreadable_values(KvStore& store, const std::string& prefix,
                                                     const std::vector<KeyValue>& pool_kvs);

}  // namespace shmipam::cluster
