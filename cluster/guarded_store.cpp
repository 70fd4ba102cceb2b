#include "cluster/guarded_store.h"

#include "cluster/cluster_identity.h"
#include "cluster/key_schema.h"
#include "cluster/revision_floor.h"
#include "cluster/store_schema.h"

namespace shmipam::cluster {

Expected<GuardedStore> GuardedStore::open(KvStore& kv, std::string prefix, std::string state_dir,
                                          const Guards& guards) {
    // One answer carries all three: which cluster, at what revision, and the layout record.
    auto record = kv.get(keys::schema(prefix));
    if (!record) return record.error();
    const ResponseHeader& answered = kv.last_header();
    // Which cluster answers, before anything is claimed in it or read as this node's.
    const bool check_id =
        guards.cluster_id == Guards::ClusterId::kRemember ||
        (guards.cluster_id == Guards::ClusterId::kCheckIfKnown && has_cluster_id(state_dir));
    if (check_id) {
        if (auto st = check_cluster_id(state_dir, answered.cluster_id); !st) return st.error();
    }
    // Whether it went back in time, before anything is written into it (the schema record
    // included) or the node's block cache rewritten from it.
    if (guards.check_revision_floor) {
        if (auto st = check_revision_floor(state_dir, answered.revision); !st) return st.error();
    }
    // The store's layout, before anything is read as this release's or written.
    if (auto st = ensure_schema(kv, prefix, *record, guards.stamp_schema); !st) return st.error();
    return GuardedStore(kv, std::move(prefix), std::move(state_dir));
}

Status GuardedStore::remember_revision() const {
    return raise_revision_floor(state_dir_, highest_revision());
}

}  // namespace shmipam::cluster
