// The store's migration from the v1 layout (docs/cluster.md, "Migrating the store"). v1 kept
// each pool under its name with no registry: a pool's meta (CIDR and block prefix) only once a
// block was claimed, none for a pool of fixed addresses, and fixed claims without a policy.
// The migration writes the v2 layout beside it:
//
//   1. each pool registered (meta and CIDR record): the v1 meta's CIDR and block prefix, or for
//      a pool without one (fixed addresses) the CIDR its pool file gives, block prefix 0;
//      pools whose CIDRs overlap are refused (v1 let them be), nothing written;
//   2. each block, fixed claim and address record created under v2 if absent, as v1 held it; a
//      claim gets keepIdle 0 (never reclaimed: the safe reading of "no policy recorded"; the
//      owning node's next ADD of the pod writes the policy the pod asks for);
//   3. each v1 meta replaced by a value no v1 release accepts, so a node still on v1 refuses to
//      claim blocks ("cut as ... migrated") instead of claiming them in a layout nobody else
//      reads;
//   4. the schema record {"version": 2} last: until it is there, this release's helpers refuse
//      the store (code 7), and a migration killed at any step is finished by running it again.
//
// v1 waiting and idle records are not carried over (each node writes its own again within a
// try or a pass). The v1 keys stay until `--remove-v1` (a rollback reads them).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/kv_store.h"
#include "cluster/pool_registry.h"
#include "engine/addr/ip_address.h"

namespace shmipam::cluster {

struct V1Store {
    struct Item {
        std::string pool;
        std::string name;  // the key's last part: a block name, a claim key, an address
        KeyValue kv;
    };
    std::vector<RegisteredPool> pools;  // as they will be registered
    std::vector<Item> blocks, claims, addresses;
    std::vector<std::string> skipped;   // v1 values that do not parse: not carried over
    std::vector<std::string> problems;  // what stops the migration (nothing is written)
    std::vector<KeyValue> metas;        // the v1 metas, to fence
};

// The v1 layout as the store holds it. `cidr_of` gives the CIDR of a pool without a v1 meta
// (from the node's pool files), nullopt when it has none.
using CidrOf = std::function<std::optional<engine::Cidr>(const std::string& pool)>;
Expected<V1Store> read_v1(KvStore& store, const std::string& prefix, const CidrOf& cidr_of);

// What applying would still write (0: the store holds all of it already).
struct MigrationCounts {
    size_t registrations = 0, blocks = 0, claims = 0, addresses = 0, fences = 0;
    bool schema = false;
    size_t total() const { return registrations + blocks + claims + addresses + fences + schema; }
};
// With apply false, only counts; with apply true, writes (steps 1 to 4) and counts what it
// wrote. A v2 key that exists already with another owner is a conflict (code 7, naming it).
Expected<MigrationCounts> migrate_v1(KvStore& store, const std::string& prefix, const V1Store& v1,
                                     bool apply);

// Deletes every v1 key (after the migration, once no node runs a v1 release).
Status remove_v1(KvStore& store, const std::string& prefix);

}  // namespace shmipam::cluster
