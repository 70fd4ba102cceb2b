// The cluster store as a node's writers open it (docs/cluster.md, "Which store"): a handle that
// exists only once the store passed every guard, so that no writer can forget one. The guards,
// checked in this order on one answer, before anything is written or trusted:
//
//   1. the cluster id (cluster/cluster_identity.h): another etcd cluster than the one this
//      node's blocks were claimed in (a cluster rebuilt from nothing, a config pointing
//      elsewhere);
//   2. the revision floor (cluster/revision_floor.h): the same cluster gone back in time (a
//      snapshot restored, a cluster rebuilt with the same flags);
//   3. the schema (cluster/store_schema.h): a store of another layout, or of a newer release.
//
// The handle is a KvStore itself: reads and writes pass through, and the highest revision
// any answer carried is what remember_revision() raises the node's floor to.
#pragma once

#include <string>

#include "base/status.h"
#include "cluster/kv_store.h"

namespace shmipam::cluster {

struct Guards {
    enum class ClusterId {
        // A node with no cluster id yet takes this store's as its own (the cluster agent: the
        // node's first claim).
        kRemember,
        // Checked against the node's when it has one; a state directory without one is never
        // given one (a tool run where no node has claimed yet).
        kCheckIfKnown,
        // Not checked: the operator's recovery, which reports a changed id itself.
        kIgnore,
    };
    ClusterId cluster_id = ClusterId::kCheckIfKnown;
    // Off only for the operator's recovery after the store went back in time, which is the way
    // out of that refusal (cluster/node_recover.h).
    bool check_revision_floor = true;
    // An empty store is stamped with this release's layout (writers); off: it reads as empty.
    bool stamp_schema = true;
};

class GuardedStore final : public KvStore {
  public:
    // Opens `kv` for the node whose cluster state directory is `state_dir` (<dataDir>/_cluster):
    // one read of the schema record, the guards on its answer, the schema stamped if asked.
    // The guards' errors (code 7, saying what to do) or the store's (code 50).
    static Expected<GuardedStore> open(KvStore& kv, std::string prefix, std::string state_dir,
                                       const Guards& guards);

    Expected<std::optional<KeyValue>> get(const std::string& key) override { return kv_->get(key); }
    Expected<std::vector<KeyValue>> get_prefix(const std::string& prefix) override {
        return kv_->get_prefix(prefix);
    }
    Expected<bool> any_under(const std::string& prefix) override { return kv_->any_under(prefix); }
    Expected<int64_t> put(const std::string& key, const std::string& value) override {
        return kv_->put(key, value);
    }
    Expected<CreateResult> create_if_absent(const std::string& key,
                                            const std::string& value) override {
        return kv_->create_if_absent(key, value);
    }
    Expected<bool> delete_at(const std::string& key, int64_t mod_revision) override {
        return kv_->delete_at(key, mod_revision);
    }
    Expected<bool> txn(const std::vector<Compare>& compares,
                       const std::vector<Write>& writes) override {
        return kv_->txn(compares, writes);
    }
    const ResponseHeader& last_header() const override { return kv_->last_header(); }

    const std::string& prefix() const { return prefix_; }
    const std::string& state_dir() const { return state_dir_; }

    // Raises the node's revision floor to the highest revision this store answered with: every
    // one is the store's own (it passed the guards), so a write made before a later failure is
    // under the floor too. A failure only leaves an older floor (a weaker guard next time).
    Status remember_revision() const;

  private:
    GuardedStore(KvStore& kv, std::string prefix, std::string state_dir)
        : kv_(&kv), prefix_(std::move(prefix)), state_dir_(std::move(state_dir)) {}

    KvStore* kv_;
    std::string prefix_, state_dir_;
};

}  // namespace shmipam::cluster
