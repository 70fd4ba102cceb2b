// The cluster verbs of a shmipamctl built without an etcd client: the static build shipped in
// the image (deploy/Containerfile), which must run on any node and so links no libcurl.
#include "tools/claim_store.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

int absent() {
    return cannot_read(
        "this shmipamctl (the image's static build) has no etcd client: run the cluster verbs "
        "with the shmipamctl of a build with libcurl (docs/operations.md)");
}

}  // namespace

int cmd_cluster_ls(const CommonOptions&, const ClusterLsOptions&) {
    return absent();
}
int cmd_cluster_gc(const CommonOptions&, const ClusterGcOptions&) {
    return absent();
}
int cmd_cluster_pass(const CommonOptions&, const ClusterPassOptions&) {
    return absent();
}
int cmd_cluster_recover(const CommonOptions&, const ClusterRecoverOptions&) {
    return absent();
}
int cmd_cluster_migrate(const CommonOptions&, const ClusterMigrateOptions&) {
    return absent();
}
int cmd_cluster_drop_pool(const CommonOptions&, const ClusterDropPoolOptions&) {
    return absent();
}
int cmd_cluster_purge(const CommonOptions&, const ClusterPurgeOptions&) {
    return absent();
}
Status hold_in_cluster_store(const ClaimNetwork& net, ClaimPlan&, bool) {
    if (!net.cluster) return Ok{};
    return make_error(Code::kInvalidConfig,
                      net.path +
                          " is a cluster mode network (ipam.etcd): its claims live in etcd too, "
                          "and this shmipamctl (the image's static build) has no etcd client: "
                          "use the shmipamctl of a build with libcurl");
}

}  // namespace shmipam::tools
