// The seam under everything cluster mode keeps in its store (docs/cluster.md): the handful of
// key-value operations block ownership, fixed addresses and the registry need, with etcd's
// meaning. etcd behind it in the product (cluster/etcd_client.h); an in-memory store in the
// tests (tests/support/memory_kv.h), so that cluster decisions are tested in process, with
// interleavings chosen by the test rather than by timing.
//
// What every implementation keeps of etcd's v3 model:
//   - one revision counter for the whole store, raised by every write that changes something
//     (all writes of one transaction share one revision);
//   - each key's create_revision (0: absent), mod_revision and version;
//   - a transaction's compares all hold, or none of its writes is applied;
//   - a compare over a prefix holds when every key under it holds it, and over no key at all
//     compares one absent key (create and mod revision 0): "nothing under the prefix".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace shmipam::cluster {

struct KeyValue {
    std::string key, value;
    int64_t create_revision = 0, mod_revision = 0, version = 0;
};

// Every answer's header: which cluster answered, and at what revision.
struct ResponseHeader {
    uint64_t cluster_id = 0;
    uint64_t member_id = 0;
    int64_t revision = 0;
    // Not etcd's: the highest revision of every answer this client got so far (kept in the
    // header so that each answer raises it): what a node remembers of the store
    // (cluster/revision_floor.h).
    int64_t highest_revision = 0;
};

struct CreateResult {
    // The key was absent and is now ours; also when an earlier attempt of this call created it
    // (the key holds exactly our value: callers make values unique with a nonce).
    bool created = false;
    std::optional<KeyValue> held;  // !created: the key as it is (whoever holds it)
    int64_t revision = 0;          // created: the revision of our put
};

class KvStore {
  public:
    virtual ~KvStore() = default;

    virtual Expected<std::optional<KeyValue>> get(const std::string& key) = 0;
    // Every key starting with `prefix`, in key order.
    virtual Expected<std::vector<KeyValue>> get_prefix(const std::string& prefix) = 0;
    // Whether any key starts with `prefix` (one key read, without its value).
    virtual Expected<bool> any_under(const std::string& prefix) = 0;
    // The revision of the put.
    virtual Expected<int64_t> put(const std::string& key, const std::string& value) = 0;
    // One transaction: if the key does not exist, put it; else read it.
    virtual Expected<CreateResult> create_if_absent(const std::string& key,
                                                    const std::string& value) = 0;
    // One transaction: delete the key if its mod_revision is still `mod_revision`. False when
    // it changed (or is gone).
    virtual Expected<bool> delete_at(const std::string& key, int64_t mod_revision) = 0;

    // One transaction: if every compare holds (a key's create or mod revision is as given; 0
    // create revision: the key is absent), apply the writes. Whether it did.
    struct Compare {
        std::string key;
        enum class Target { kCreate, kMod } target = Target::kCreate;
        int64_t revision = 0;
        bool whole_prefix = false;  // every key starting with `key` (kCreate 0: none exists)
    };
    struct Write {
        std::string key;
        std::optional<std::string> value;  // nullopt: delete the key
        bool whole_prefix = false;         // a delete of every key starting with `key`
    };
    virtual Expected<bool> txn(const std::vector<Compare>& compares,
                               const std::vector<Write>& writes) = 0;

    // The header of the last answer (its cluster_id identifies the cluster).
    virtual const ResponseHeader& last_header() const = 0;
    // The highest revision any answer of this client carried (0: none yet).
    int64_t highest_revision() const { return last_header().highest_revision; }
};

// The first key after every key starting with `prefix` (etcd's range_end for a prefix).
std::string prefix_end(const std::string& prefix);

// 16 random hex digits: what makes a value written by create_if_absent or txn this writer's own
// (an attempt that timed out after its commit is told apart by re-reading).
std::string nonce();

}  // namespace shmipam::cluster
