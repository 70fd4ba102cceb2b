#include "cluster/store_values.h"

#include <map>
#include <optional>

#include "cluster/block_store.h"
#include "cluster/fixed_claims.h"
#include "cluster/key_schema.h"
#include "cluster/node_name.h"
#include "cluster/pool_registry.h"
#include "cluster/waiting.h"

namespace shmipam::cluster {

namespace {

// An address record: {"claim": "<claim key>"} under a key that is an address.
bool address_record(const std::string& address, const KeyValue& kv) {
    return engine::IpAddress::parse(address).has_value() && !claim_of_address_record(kv).empty();
}

// A CIDR record: {"pool": "<name>"} under a key that is a CIDR.
bool cidr_record(const std::string& name, const KeyValue& kv) {
    return keys::block_of_name(name).has_value() && !pool_of_record(kv).empty();
}

}  // namespace

Expected<std::vector<std::string>> unreadable_values(KvStore& store, const std::string& prefix,
                                                     const std::vector<KeyValue>& pool_kvs) {
    auto geometry_of = BlockStore::geometries(prefix, pool_kvs);
    std::vector<std::string> out;
    for (const KeyValue& kv : pool_kvs) {
        bool readable = false;
        if (auto m = keys::split(prefix, kv.key, keys::kMeta); m && m->rest.empty()) {
            readable = geometry_of[m->pool].has_value();
        } else if (auto b = keys::split(prefix, kv.key, keys::kBlocks)) {
            const auto g = geometry_of.find(b->pool);
            readable = BlockStore::parse(kv, g == geometry_of.end() ? std::nullopt : g->second)
                           .has_value();
        } else if (auto c = keys::split(prefix, kv.key, keys::kClaims)) {
            readable = parse_fixed_claim(c->rest, kv).has_value();
        } else if (auto a = keys::split(prefix, kv.key, keys::kAddresses)) {
            readable = address_record(a->rest, kv);
        } else if (auto w = keys::split(prefix, kv.key, keys::kWaiting)) {
            // Read at its own second: a stale record is old, not unreadable.
            readable = is_node_name(w->rest) && parse_waiter(w->rest, kv, 0).has_value();
        } else if (auto i = keys::split(prefix, kv.key, keys::kIdle)) {
            readable = parse_idle(i->rest, kv).has_value();
        }
        if (!readable) out.push_back(kv.key);
    }
    auto records = store.get_prefix(keys::cidrs(prefix));
    if (!records) return records.error();
    for (const KeyValue& kv : *records) {
        if (!cidr_record(kv.key.substr(keys::cidrs(prefix).size()), kv)) out.push_back(kv.key);
    }
    return out;
}

}  // namespace shmipam::cluster
