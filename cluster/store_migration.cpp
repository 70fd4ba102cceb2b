#include "cluster/store_migration.h"

#include <map>
#include <nlohmann/json.hpp>

#include "cluster/block_store.h"
#include "cluster/key_schema.h"
#include "cluster/node_name.h"

namespace shmipam::cluster {

using engine::Cidr;
using nlohmann::json;

namespace {

// What a v1 release reads in a fenced meta: a CIDR no pool has, so its claims are refused with
// a message that says why.
const char* kFencedCidr = "migrated to the v2 layout: upgrade shmipam on this node";

std::optional<json> object_of(const std::string& text) {
    json v = json::parse(text, nullptr, false);
    if (!v.is_object()) return std::nullopt;
    return v;
}

bool text_field(const json& v, const char* k) {
    const auto it = v.find(k);
    return it != v.end() && it->is_string();
}

// The v2 value of a v1 claim: the same, with the policy nobody recorded read as "never".
std::optional<std::string> v2_claim(const V1Store::Item& c) {
    auto v = object_of(c.kv.value);
    if (!v || !text_field(*v, "address") || !text_field(*v, "node") || !text_field(*v, "nonce")) {
        return std::nullopt;
    }
    (*v)["keepIdle"] = 0;
    return v->dump();
}

// The owner a value names (a block's or claim's "node", an address record's "claim").
std::string owner_in(const std::string& value, const char* field) {
    auto v = object_of(value);
    if (!v || !text_field(*v, field)) return "";
    return (*v)[field].get<std::string>();
}

}  // namespace

Expected<V1Store> read_v1(KvStore& store, const std::string& prefix, const CidrOf& cidr_of) {
    const std::string root = keys::v1_pools(prefix);
    auto kvs = store.get_prefix(root);
    if (!kvs) return kvs.error();
    V1Store out;
    std::map<std::string, std::optional<RegisteredPool>> pools;
    for (const KeyValue& kv : *kvs) {
        const std::string tail = kv.key.substr(root.size());
        const size_t slash = tail.find('/');
        if (slash == std::string::npos) {
            out.skipped.push_back(kv.key);
            continue;
        }
        const std::string pool = tail.substr(0, slash);
        const std::string rest = tail.substr(slash);
        pools.emplace(pool, std::nullopt);
        const auto under = [&](std::string_view kind) {
            return rest.compare(0, kind.size(), kind) == 0 && rest.size() > kind.size();
        };
        const auto name = [&](std::string_view kind) { return rest.substr(kind.size()); };
        if (rest == keys::kMeta) {
            out.metas.push_back(kv);
            if (auto m = parse_meta(pool, kv.value)) {
                pools[pool] = m;
            } else if (owner_in(kv.value, "cidr") == kFencedCidr) {
                // Fenced by an earlier run: the pool as that run registered it.
                auto reg = registration(store, prefix, pool);
                if (!reg) return reg.error();
                pools[pool] = *reg;
            } else {
                out.skipped.push_back(kv.key);
            }
        } else if (under(keys::kBlocks)) {
            out.blocks.push_back({pool, name(keys::kBlocks), kv});
        } else if (under(keys::kClaims)) {
            out.claims.push_back({pool, name(keys::kClaims), kv});
        } else if (under(keys::kAddresses)) {
            out.addresses.push_back({pool, name(keys::kAddresses), kv});
        } else if (!under(keys::kWaiting) && !under(keys::kIdle)) {
            out.skipped.push_back(kv.key);
        }
    }
    for (auto& [pool, reg] : pools) {
        if (!reg) {
            // No v1 meta: a pool of fixed addresses, or one whose meta never came.
            bool has_blocks = false;
            for (const auto& b : out.blocks) has_blocks = has_blocks || b.pool == pool;
            auto c = cidr_of(pool);
            if (has_blocks || !c) {
                out.problems.push_back(
                    "pool " + pool + " has no readable v1 meta" +
                    (has_blocks ? std::string(" but has blocks") : "") +
                    (c ? std::string() : " and no pool file of this node names it") +
                    ": give its CIDR with --pool-cidr " + pool + "=CIDR");
                continue;
            }
            reg = RegisteredPool{pool, Cidr{c->network(), c->prefix}, 0};
        }
        out.pools.push_back(*reg);
    }
    for (size_t i = 0; i < out.pools.size(); ++i) {
        for (size_t j = i + 1; j < out.pools.size(); ++j) {
            if (cidrs_overlap(out.pools[i].cidr, out.pools[j].cidr)) {
                out.problems.push_back("pools " + out.pools[i].pool + " (" +
                                       out.pools[i].cidr.to_string() + ") and " +
                                       out.pools[j].pool + " (" + out.pools[j].cidr.to_string() +
                                       ") overlap, which v2 refuses: drop one of them first");
            }
        }
    }
    // Values a v2 node would not read are not carried over (cluster ls would name them).
    std::map<std::string, std::optional<BlockStore::Geometry>> geometry_of;
    for (const auto& p : out.pools) {
        geometry_of[p.pool] = BlockStore::Geometry{p.cidr, p.block_prefix};
    }
    std::vector<V1Store::Item> blocks;
    for (auto& b : out.blocks) {
        if (BlockStore::parse(b.kv, geometry_of[b.pool])) {
            blocks.push_back(std::move(b));
        } else {
            out.skipped.push_back(b.kv.key);
        }
    }
    out.blocks = std::move(blocks);
    std::vector<V1Store::Item> claims;
    for (auto& c : out.claims) {
        const std::string node = owner_in(c.kv.value, "node");
        if (v2_claim(c) && is_node_name(node)) {
            claims.push_back(std::move(c));
        } else {
            out.skipped.push_back(c.kv.key);
        }
    }
    out.claims = std::move(claims);
    return out;
}

Expected<MigrationCounts> migrate_v1(KvStore& store, const std::string& prefix, const V1Store& v1,
                                     bool apply) {
    if (!v1.problems.empty()) {
        std::string why;
        for (const auto& p : v1.problems) why += (why.empty() ? "" : "; ") + p;
        return make_error(Code::kInvalidConfig, "the v1 store cannot be migrated as it is: " + why);
    }
    MigrationCounts n;
    for (const auto& p : v1.pools) {
        auto held = registration(store, prefix, p.pool);
        if (!held) return held.error();
        if (*held) continue;  // registered by an earlier run (a conflict is register_pool's)
        ++n.registrations;
        if (!apply) continue;
        if (auto st = register_pool(store, prefix, p.pool, p.cidr, p.block_prefix); !st) {
            return st.error();
        }
    }
    // Each key created if absent; one an earlier run created holds the same owner.
    const auto carry = [&](const std::string& key, const std::string& value, const char* field,
                           size_t& count) -> Status {
        auto held = store.get(key);
        if (!held) return held.error();
        if (*held) {
            if (owner_in((*held)->value, field) == owner_in(value, field)) return Ok{};
            return make_error(Code::kInvalidConfig, key + " holds " + (*held)->value +
                                                        " already, where v1 holds " + value +
                                                        ": resolve it by hand, then migrate again");
        }
        ++count;
        if (!apply) return Ok{};
        auto made = store.create_if_absent(key, value);
        if (!made) return made.error();
        return Ok{};
    };
    for (const auto& b : v1.blocks) {
        auto c = keys::block_of_name(b.name);
        if (!c) continue;
        if (auto st = carry(keys::block(prefix, b.pool, *c), b.kv.value, "node", n.blocks); !st) {
            return st.error();
        }
    }
    for (const auto& c : v1.claims) {
        if (auto st = carry(keys::claim(prefix, c.pool, c.name), *v2_claim(c), "node", n.claims);
            !st) {
            return st.error();
        }
    }
    for (const auto& a : v1.addresses) {
        const std::string key = keys::addresses(prefix, a.pool) + a.name;
        if (auto st = carry(key, a.kv.value, "claim", n.addresses); !st) return st.error();
    }
    const json fence{{"cidr", kFencedCidr}, {"blockPrefix", -1}};
    for (const auto& p : v1.pools) {
        const std::string key = keys::v1_pools(prefix) + p.pool + std::string(keys::kMeta);
        auto held = store.get(key);
        if (!held) return held.error();
        if (*held && owner_in((*held)->value, "cidr") == kFencedCidr) continue;
        ++n.fences;
        if (apply) {
            auto put = store.put(key, fence.dump());
            if (!put) return put.error();
        }
    }
    auto version = store.get(keys::schema(prefix));
    if (!version) return version.error();
    if (!*version) {
        n.schema = true;
        if (apply) {
            const json record{{"version", keys::kSchemaVersion}, {"migratedFrom", 1}};
            auto made = store.create_if_absent(keys::schema(prefix), record.dump());
            if (!made) return made.error();
        }
    }
    return n;
}

Status remove_v1(KvStore& store, const std::string& prefix) {
    auto done = store.txn({}, {{prefix + "/v1/", std::nullopt, true}});
    if (!done) return done.error();
    return Ok{};
}

}  // namespace shmipam::cluster
