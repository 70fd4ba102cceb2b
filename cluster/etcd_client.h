// A client of etcd's v3 API through its JSON gateway (HTTP/1.1 + JSON, libcurl), the cluster
// store of docs/cluster.md. Only what block ownership needs: read a key or a prefix, create a
// key only if it is absent (one transaction), delete a key only at the revision it was read at,
// and the cluster's identity. Every call tries the endpoints in turn, each attempt bounded by
// attempt_timeout_ms, the whole call by budget_ms: a request sent to a member that lost its
// leader hangs until its own timeout (measured with etcd 3.4), so that timeout, not the
// election, sets how long a call can stall.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace shmipam::cluster {

struct EtcdConfig {
    std::vector<std::string> endpoints;        // "http://127.0.0.1:2379", "https://..."
    std::string ca_file, cert_file, key_file;  // TLS: the CA, and the client's certificate
    std::string username, password;            // etcd's own authentication, if enabled
    uint64_t attempt_timeout_ms = 1000;
    uint64_t budget_ms = 5000;
};

struct KeyValue {
    std::string key, value;
    int64_t create_revision = 0, mod_revision = 0, version = 0;
};

// Every response's header: which cluster answered, and at what revision.
struct ResponseHeader {
    uint64_t cluster_id = 0;
    uint64_t member_id = 0;
    int64_t revision = 0;
    // Not etcd's: the highest revision of every answer this client got so far (kept in the
    // header so that each answer's parse raises it): what a node remembers of the store
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

class EtcdClient {
  public:
    explicit EtcdClient(EtcdConfig cfg);
    ~EtcdClient();
    EtcdClient(const EtcdClient&) = delete;
    EtcdClient& operator=(const EtcdClient&) = delete;

    Expected<std::optional<KeyValue>> get(const std::string& key);
    Expected<std::vector<KeyValue>> get_prefix(const std::string& prefix);
    // Whether any key starts with `prefix` (one key read, without its value).
    Expected<bool> any_under(const std::string& prefix);
    Expected<int64_t> put(const std::string& key, const std::string& value);
    // One transaction: if the key does not exist, put it; else read it.
    Expected<CreateResult> create_if_absent(const std::string& key, const std::string& value);
    // One transaction: delete the key if its mod_revision is still `mod_revision`. False when
    // it changed (or is gone).
    Expected<bool> delete_at(const std::string& key, int64_t mod_revision);

    // One transaction of what fixed addresses need: if every key's create or mod revision is
    // as given (0 create revision: the key is absent), apply the writes. Whether it did.
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
    Expected<bool> txn(const std::vector<Compare>& compares, const std::vector<Write>& writes);

    // The answering member and the leader it knows (0: none).
    struct Status {
        uint64_t member_id = 0, leader_id = 0;
    };
    Expected<Status> status();

    // The header of the last answer (its cluster_id identifies the cluster).
    const ResponseHeader& last_header() const { return header_; }
    // The highest revision any answer of this client carried (0: none yet).
    int64_t highest_revision() const { return header_.highest_revision; }

  private:
    struct Impl;
    Expected<std::string> call(const std::string& path, const std::string& body);
    // etcd's own authentication (username and password): a token, asked for before the first
    // call and again when etcd says it expired (HTTP 401).
    ::shmipam::Status authenticate();

    EtcdConfig cfg_;
    std::unique_ptr<Impl> impl_;
    ResponseHeader header_;
    std::string token_;
    std::chrono::steady_clock::time_point deadline_{};  // of the call in progress
    bool in_call_ = false;
    size_t preferred_ = 0;  // the endpoint that answered last
};

// 16 random hex digits: what makes a value written by create_if_absent or txn this writer's own
// (an attempt that timed out after its commit is told apart by re-reading).
std::string nonce();

}  // namespace shmipam::cluster
