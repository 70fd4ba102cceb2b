// shmipamctl cluster migrate (docs/cluster.md, "Migrating the store"): the store an earlier
// release wrote (the v1 layout) written in this release's, beside it (cluster/store_migration.h).
// A dry run unless --apply; run once, from any node, after every node runs this release.
#include <iostream>
#include <map>

#include "cluster/etcd_config.h"
#include "cluster/key_schema.h"
#include "cluster/store_migration.h"
#include "pools/pool_dir.h"
#include "tools/cluster_setup.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

// --pool-cidr NAME=CIDR, each.
Expected<std::map<std::string, engine::Cidr>> given_cidrs(const std::vector<std::string>& args) {
    std::map<std::string, engine::Cidr> out;
    for (const auto& a : args) {
        const size_t eq = a.find('=');
        auto c = eq == std::string::npos ? std::nullopt : engine::Cidr::parse(a.substr(eq + 1));
        if (eq == 0 || !c) {
            return make_error(Code::kDecode,
                              "--pool-cidr " + a + ": give NAME=CIDR (e.g. sts=10.9.0.0/24)");
        }
        out[a.substr(0, eq)] = *c;
    }
    return out;
}

std::string counts_text(const cluster::MigrationCounts& n) {
    return std::to_string(n.registrations) + " pool registrations, " + std::to_string(n.blocks) +
           " blocks, " + std::to_string(n.claims) + " fixed claims, " +
           std::to_string(n.addresses) + " address records, " + std::to_string(n.fences) +
           " v1 metas fenced" + (n.schema ? ", the schema record" : "");
}

}  // namespace

int cmd_cluster_migrate(const CommonOptions& common, const ClusterMigrateOptions& o) {
    auto given = given_cidrs(o.pool_cidrs);
    if (!given) return cannot_read(given.error());
    auto setup = read_setup(o.config, "", common.run_dir);
    if (!setup) return cannot_read(setup.error());
    auto cfg = cluster::etcd_config_from_json(setup->etcd);
    if (!cfg) return cannot_read(cfg.error());
    cluster::EtcdClient etcd(*cfg);
    const std::string prefix = cluster::etcd_prefix(setup->etcd);

    // The pools' CIDRs for pools the v1 layout has no meta of: given, else this node's files.
    std::optional<pools::Catalog> catalog;
    if (!setup->pools_dir.empty()) {
        auto loaded = pools::load_pools_dir(setup->pools_dir);
        if (!loaded) return cannot_read(loaded.error());
        catalog = std::move(*loaded);
    }
    const cluster::CidrOf cidr_of = [&](const std::string& pool) -> std::optional<engine::Cidr> {
        if (auto g = given->find(pool); g != given->end()) return g->second;
        const pools::IpPool* p = catalog ? catalog->pool(pool) : nullptr;
        if (p != nullptr) return p->subnet;
        return std::nullopt;
    };
    auto v1 = cluster::read_v1(etcd, prefix, cidr_of);
    if (!v1) return cannot_read(v1.error());
    for (const auto& key : v1->skipped) {
        std::cout << "not carried over (not a v1 value a node would read): " << key << "\n";
    }
    auto n = cluster::migrate_v1(etcd, prefix, *v1, o.apply);
    if (!n) return cannot_read(n.error());
    if (o.apply) {
        std::cout << "migrated " << v1->pools.size() << " pools: wrote " << counts_text(*n) << "\n";
    } else if (n->total() != 0) {
        std::cout << "would write " << counts_text(*n) << " for " << v1->pools.size()
                  << " pools (dry run; --apply to act)\n";
        return kExitViolations;
    } else {
        std::cout << "the store holds schema version " << cluster::keys::kSchemaVersion
                  << " with everything of v1 carried over: nothing to do\n";
    }
    if (o.remove_v1) {
        if (!o.apply) {
            std::cout << "would delete every v1 key (dry run; --apply to act)\n";
            return kExitViolations;
        }
        if (auto st = cluster::remove_v1(etcd, prefix); !st) return cannot_read(st.error());
        std::cout << "deleted every v1 key\n";
    }
    return kExitClean;
}

}  // namespace shmipam::tools
