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
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/kv_store.h"

namespace shmipam::cluster {

struct EtcdConfig {
    std::vector<std::string> endpoints;        // "http://127.0.0.1:2379", "https://..."
    std::string ca_file, cert_file, key_file;  // TLS: the CA, and the client's certificate
    std::string username, password;            // etcd's own authentication, if enabled
    uint64_t attempt_timeout_ms = 1000;
    uint64_t budget_ms = 5000;
};

class EtcdClient : public KvStore {
  public:
    explicit EtcdClient(EtcdConfig cfg);
    ~EtcdClient() override;
    EtcdClient(const EtcdClient&) = delete;
    EtcdClient& operator=(const EtcdClient&) = delete;

    Expected<std::optional<KeyValue>> get(const std::string& key) override;
    Expected<std::vector<KeyValue>> get_prefix(const std::string& prefix) override;
    Expected<bool> any_under(const std::string& prefix) override;
    Expected<int64_t> put(const std::string& key, const std::string& value) override;
    Expected<CreateResult> create_if_absent(const std::string& key,
                                            const std::string& value) override;
    Expected<bool> delete_at(const std::string& key, int64_t mod_revision) override;
    Expected<bool> txn(const std::vector<Compare>& compares,
                       const std::vector<Write>& writes) override;
    const ResponseHeader& last_header() const override { return header_; }

    // The answering member and the leader it knows (0: none).
    struct Status {
        uint64_t member_id = 0, leader_id = 0;
    };
    Expected<Status> status();

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

}  // namespace shmipam::cluster
