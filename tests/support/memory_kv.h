// An in-memory stand-in for etcd behind cluster::KvStore (cluster/kv_store.h), so that cluster
// mode's decisions are tested in process: fast, deterministic, with the interleavings a test
// chooses. It keeps what kv_store.h lists of etcd's v3 model (one revision counter, each key's
// create and mod revision and version, all-or-nothing transactions, compares over a prefix) and
// answers with a cluster id. What only a real etcd shows (members killed, leaders lost, TLS,
// the gateway's encoding) stays with the tests against one (tests/support/etcd_cluster.h).
//
// MemoryEtcd is the store; each MemoryKv is one client of it, with its own last header (as each
// EtcdClient has), so two actors sharing a store see their own highest revision.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "cluster/kv_store.h"

namespace shmipam::testing {

class MemoryEtcd {
  public:
    explicit MemoryEtcd(uint64_t cluster_id = 0xc1a55e7) : cluster_id_(cluster_id) {}

    // The whole store at a moment: what a snapshot holds, to restore later (the store going
    // back in time) or to compare.
    struct State {
        int64_t revision = 1;  // etcd starts at 1
        std::map<std::string, cluster::KeyValue> keys;
    };
    const State& state() const { return state_; }
    void restore(const State& s) { state_ = s; }
    int64_t revision() const { return state_.revision; }
    // A rebuilt cluster, or another one: answers with this id from now on.
    void set_cluster_id(uint64_t id) { cluster_id_ = id; }

    // The next `n` calls, of any client, fail as an unreachable etcd does (code 50).
    void fail_calls(int n) { failing_calls_ = n; }
    // Called before each call of any client with the call's name ("get", "txn", ...) and its
    // key (the first compare's or write's for a txn): where a test runs another actor's steps
    // between two of this one's. Not called again while it runs (the other actor's own calls
    // go straight through).
    std::function<void(const std::string& call, const std::string& key)> before_call;
    // Calls answered so far, of every client.
    uint64_t calls() const { return calls_; }

  private:
    friend class MemoryKv;

    uint64_t cluster_id_;
    State state_;
    int failing_calls_ = 0;
    uint64_t calls_ = 0;
    bool in_before_call_ = false;
};

class MemoryKv final : public cluster::KvStore {
  public:
    explicit MemoryKv(MemoryEtcd& etcd) : etcd_(etcd) {}

    Expected<std::optional<cluster::KeyValue>> get(const std::string& key) override;
    Expected<std::vector<cluster::KeyValue>> get_prefix(const std::string& prefix) override;
    Expected<bool> any_under(const std::string& prefix) override;
    Expected<int64_t> put(const std::string& key, const std::string& value) override;
    Expected<cluster::CreateResult> create_if_absent(const std::string& key,
                                                     const std::string& value) override;
    Expected<bool> delete_at(const std::string& key, int64_t mod_revision) override;
    Expected<bool> txn(const std::vector<Compare>& compares,
                       const std::vector<Write>& writes) override;
    const cluster::ResponseHeader& last_header() const override { return header_; }

  private:
    // The steps every call starts with: the test's hook, a planted failure, the count. Code 50
    // for a planted failure.
    Status enter(const std::string& call, const std::string& key);
    // Every answer's header, as etcd's: the store's revision now.
    void answered();
    bool holds(const Compare& c) const;
    // Applies the writes at one new revision (none when nothing changed).
    void apply(const std::vector<Write>& writes);

    MemoryEtcd& etcd_;
    cluster::ResponseHeader header_;
};

}  // namespace shmipam::testing
