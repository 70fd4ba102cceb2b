#include "cluster/pool_registry.h"

#include <nlohmann/json.hpp>

#include "cluster/key_schema.h"

namespace shmipam::cluster {

using engine::Cidr;
using nlohmann::json;

namespace {

// Tries before a registration gives up on racing registrations (each lost race means another
// pool was registered or dropped meanwhile).
constexpr int kTries = 16;

Cidr exact(const Cidr& c) {
    return Cidr{c.network(), c.prefix};
}

std::string shape(const Cidr& cidr, int block_prefix) {
    return exact(cidr).to_string() + (block_prefix == 0
                                          ? std::string(" (fixed addresses)")
                                          : " in /" + std::to_string(block_prefix) + " blocks");
}

const char* kHowToChange =
    ": every node must cut a pool the same way (the same pool CIDR and ipam.blockSize), and two "
    "pools' addresses must not overlap. To "
    "change a pool's CIDR or block size, or give a CIDR to another pool: remove the pool from "
    "every node's poolsDir, let its pods go and the nodes' passes give its blocks back, then "
    "`shmipamctl cluster drop-pool --pool NAME --apply` (docs/cluster.md, \"Changing a pool's "
    "CIDR or block size\")";

Status refused(const std::string& why) {
    return make_error(Code::kInvalidConfig, why + kHowToChange);
}

}  // namespace

bool cidrs_overlap(const Cidr& a, const Cidr& b) {
    return a.address.family == b.address.family &&
           (a.contains(b.network()) || b.contains(a.network()));
}

std::string pool_of_record(const KeyValue& kv) {
    const json v = json::parse(kv.value, nullptr, false);
    const auto it = v.is_object() ? v.find("pool") : v.end();
    return v.is_object() && it != v.end() && it->is_string() ? it->get<std::string>() : "";
}

std::optional<RegisteredPool> parse_meta(const std::string& pool, const std::string& value) {
    const json v = json::parse(value, nullptr, false);
    const auto cidr = v.is_object() ? v.find("cidr") : v.end();
    const auto prefix = v.is_object() ? v.find("blockPrefix") : v.end();
    if (!v.is_object() || cidr == v.end() || !cidr->is_string() || prefix == v.end() ||
        !prefix->is_number_integer()) {
        return std::nullopt;
    }
    auto c = Cidr::parse(cidr->get<std::string>());
    const int64_t p = prefix->get<int64_t>();
    // A block prefix between the pool's own and the family's width, or 0 (not cut).
    if (!c || (p != 0 && (p < c->prefix || p > c->address.bits()))) return std::nullopt;
    return RegisteredPool{pool, exact(*c), int(p)};
}

Expected<std::optional<RegisteredPool>> registration(KvStore& store, const std::string& prefix,
                                                     const std::string& pool) {
    auto kv = store.get(keys::meta(prefix, pool));
    if (!kv) return kv.error();
    if (!*kv) return std::optional<RegisteredPool>{};
    return parse_meta(pool, (*kv)->value);
}

Status register_pool(KvStore& store, const std::string& prefix, const std::string& pool,
                     const Cidr& pool_cidr, int block_prefix) {
    const Cidr want = exact(pool_cidr);
    const json meta{{"cidr", want.to_string()}, {"blockPrefix", block_prefix}};
    for (int attempt = 0; attempt < kTries; ++attempt) {
        auto held = store.get(keys::meta(prefix, pool));
        if (!held) return held.error();
        if (*held) {
            // The common case: registered already, by this node or another.
            auto m = parse_meta(pool, (*held)->value);
            if (!m) {
                return make_error(Code::kInvalidConfig,
                                  "pool " + pool + "'s registration " + (*held)->key + " holds " +
                                      (*held)->value +
                                      ", which is not {\"cidr\", \"blockPrefix\"}: it was "
                                      "written by hand or damaged; no block of the pool is "
                                      "claimed until it is put right or the pool dropped");
            }
            if (m->cidr.to_string() == want.to_string() && m->block_prefix == block_prefix) {
                return Ok{};
            }
            return refused("pool " + pool + " is registered in the cluster as " +
                           shape(m->cidr, m->block_prefix) + ", and this node's pool gives " +
                           shape(want, block_prefix));
        }
        auto generation = store.get(keys::registry(prefix));
        if (!generation) return generation.error();
        auto records = store.get_prefix(keys::cidrs(prefix));
        if (!records) return records.error();
        std::optional<KeyValue> own_record;
        for (const KeyValue& kv : *records) {
            auto c = keys::block_of_name(kv.key.substr(keys::cidrs(prefix).size()));
            const std::string holder = pool_of_record(kv);
            if (!c || holder.empty()) continue;  // unreadable: cluster ls reports it
            if (holder == pool) {
                if (c->to_string() == want.to_string()) {
                    own_record = kv;  // a meta removed alone: written again below
                    continue;
                }
                return refused("pool " + pool + " holds " + c->to_string() +
                               " in the cluster's registry (its meta is missing), and this "
                               "node's pool gives " +
                               want.to_string());
            }
            if (cidrs_overlap(*c, want)) {
                return refused("pool " + pool + "'s " + want.to_string() + " overlaps " +
                               c->to_string() + ", which pool " + holder + " holds in the cluster");
            }
        }
        // Blocks of the pool cut another way (its meta removed by hand): they would overlap.
        auto blocks = store.get_prefix(keys::blocks(prefix, pool));
        if (!blocks) return blocks.error();
        for (const KeyValue& kv : *blocks) {
            auto b = keys::block_of_name(kv.key.substr(kv.key.rfind('/') + 1));
            if (b && (b->prefix != block_prefix || !want.contains(b->address))) {
                return refused("pool " + pool + " has block " + b->to_string() +
                               " in the cluster and no registration, and this node's pool gives " +
                               shape(want, block_prefix));
            }
        }
        std::vector<KvStore::Compare> compares{
            {keys::meta(prefix, pool), KvStore::Compare::Target::kCreate, 0}};
        if (*generation) {
            compares.push_back({keys::registry(prefix), KvStore::Compare::Target::kMod,
                                (**generation).mod_revision});
        } else {
            compares.push_back({keys::registry(prefix), KvStore::Compare::Target::kCreate, 0});
        }
        if (own_record) {
            compares.push_back(
                {own_record->key, KvStore::Compare::Target::kMod, own_record->mod_revision});
        } else {
            compares.push_back({keys::cidr(prefix, want), KvStore::Compare::Target::kCreate, 0});
        }
        auto done = store.txn(compares, {{keys::meta(prefix, pool), meta.dump()},
                                         {keys::cidr(prefix, want), json{{"pool", pool}}.dump()},
                                         {keys::registry(prefix), nonce()}});
        if (!done) return done.error();
        if (*done) return Ok{};
    }
    return make_error(
        Code::kTryAgainLater,
        "the cluster's pool registry kept changing while pool " + pool + " was being registered");
}

Expected<bool> drop_pool(KvStore& store, const std::string& prefix, const std::string& pool,
                         const std::optional<KeyValue>& meta,
                         const std::optional<KeyValue>& cidr_record) {
    // Only once no block and no fixed claim of the pool is left (the caller gives those back
    // first, each at the revision it read): one made since keeps the pool registered.
    std::vector<KvStore::Compare> compares{
        {keys::blocks(prefix, pool), KvStore::Compare::Target::kCreate, 0, true},
        {keys::claims(prefix, pool), KvStore::Compare::Target::kCreate, 0, true},
    };
    std::vector<KvStore::Write> writes{
        {keys::pool_root(prefix, pool), std::nullopt, true},
        {keys::registry(prefix), nonce()},
    };
    if (meta) compares.push_back({meta->key, KvStore::Compare::Target::kMod, meta->mod_revision});
    if (cidr_record) {
        compares.push_back(
            {cidr_record->key, KvStore::Compare::Target::kMod, cidr_record->mod_revision});
        writes.push_back({cidr_record->key, std::nullopt});
    }
    return store.txn(compares, writes);
}

}  // namespace shmipam::cluster
