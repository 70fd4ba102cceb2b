// Which layout the cluster store holds (docs/cluster.md, "The store's schema"). Every writer
// checks it before anything else: a store of the earlier layout is migrated by an operator
// (`shmipamctl cluster migrate`, cluster/migration.h), never written in two layouts at once,
// and a store a newer release wrote is left to that release.
#pragma once

#include <optional>

#include "base/status.h"
#include "cluster/kv_store.h"

namespace shmipam::cluster {

// Ok when the store holds this release's layout. An empty store (no key of any layout under the
// prefix) is stamped with it, unless `stamp` is false (a reader: an empty store reads as empty).
// Code 7 naming what to do for a store of the v1 layout (no version record, v1 keys present) or
// of another version.
Status ensure_schema(KvStore& kv, const std::string& prefix, bool stamp = true);
// The same with the schema record as just read (nullopt: absent), which saves reading it again.
Status ensure_schema(KvStore& kv, const std::string& prefix, const std::optional<KeyValue>& record,
                     bool stamp);

}  // namespace shmipam::cluster
