#include "tools/cluster_moved_claims.h"

#include "cluster/etcd_config.h"
#include "cluster/fixed_claims.h"
#include "engine/addr/fingerprint.h"
#include "engine/ops/allocator.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

std::string listed(const std::vector<engine::IpAddress>& addresses) {
    std::string out;
    for (const auto& a : addresses) out += (out.empty() ? "" : ", ") + a.to_string();
    return out;
}

}  // namespace

Expected<std::vector<PassRow>> moved_claims(const ClusterSetup& setup, cluster::KvStore& etcd,
                                            const std::string& pool) {
    std::vector<PassRow> out;
    auto store = open_network(setup.run_dir, "pool/" + pool, shm::Access::kReadOnly);
    if (!store) return out;  // no state of the pool on this node
    engine::NetworkConfig none;
    std::vector<engine::ClaimView> in_use;
    for (auto& local : engine::Allocator(**store, none).claims()) {
        if (local.use == engine::ClaimView::Use::kInUse) in_use.push_back(std::move(local));
    }
    if (in_use.empty()) return out;
    auto claims = cluster::FixedClaims(etcd, cluster::etcd_prefix(setup.etcd)).all(pool);
    if (!claims) return claims.error();
    for (const auto& local : in_use) {
        const cluster::FixedClaim* found = nullptr;
        for (const auto& c : *claims) {
            if (engine::fingerprint(c.key, cluster::ifname_of_claim_key(c.key)) == local.fp) {
                found = &c;
            }
        }
        // The store's key is whole; the node's may be cut to its entry's field.
        const std::string& key = found != nullptr ? found->key : local.key;
        PassRow row{pool, "claim " + key + " (" + listed(local.addresses) + ")",
                    PassRow::Action::kMoved};
        row.container = local.container_id;
        if (found == nullptr) {
            row.why = "the store holds no such claim (given up or deleted)";
        } else if (found->node != setup.node) {
            row.owner = found->node;
            row.why = "node " + found->node + " holds it now";
        } else {
            bool same = false;
            for (const auto& a : local.addresses) same = same || a == found->address;
            if (same) continue;
            row.owner = found->node;
            row.why = "the store's claim holds " + found->address.to_string() + " now (made again)";
        }
        out.push_back(std::move(row));
    }
    return out;
}

}  // namespace shmipam::tools
