#include "cluster/waiting.h"

#include <ctime>
#include <nlohmann/json.hpp>

#include "cluster/key_schema.h"

namespace shmipam::cluster {

using nlohmann::json;

namespace {

uint64_t now_unix_s() {
    return uint64_t(std::time(nullptr));
}

// A number field of a stored value, or nullopt when it is absent or of another type.
std::optional<uint64_t> number(const json& v, const char* field) {
    const auto it = v.is_object() ? v.find(field) : v.end();
    if (!v.is_object() || it == v.end() || !it->is_number_unsigned()) return std::nullopt;
    return it->get<uint64_t>();
}

}  // namespace

Status Waiting::mark_waiting(const std::string& pool, const std::string& node) {
    auto r = etcd_.put(keys::waiter(prefix_, pool, node), json{{"lastUnixS", now_unix_s()}}.dump());
    if (!r) return r.error();
    return Ok{};
}

Status Waiting::clear_waiting(const std::string& pool, const std::string& node) {
    auto r = etcd_.txn({}, {{keys::waiter(prefix_, pool, node), std::nullopt}});
    if (!r) return r.error();
    return Ok{};
}

Expected<std::vector<Waiter>> Waiting::waiters(const std::string& pool, uint64_t now) {
    const std::string root = keys::waiting(prefix_, pool);
    auto kvs = etcd_.get_prefix(root);
    if (!kvs) return kvs.error();
    std::vector<Waiter> out;
    for (const KeyValue& kv : *kvs) {
        const auto last = number(json::parse(kv.value, nullptr, false), "lastUnixS");
        if (!last || *last + kWaitingFreshS < now) continue;
        out.push_back({kv.key.substr(root.size()), *last});
    }
    return out;
}

Status Waiting::mark_idle(const std::string& pool, const engine::Cidr& block,
                          const std::string& node) {
    const json v{{"node", node}, {"sinceUnixS", now_unix_s()}};
    const std::string key = keys::idle_block(prefix_, pool, block);
    auto r = etcd_.create_if_absent(key, v.dump());
    if (!r) return r.error();
    if (r->created || !r->held) return Ok{};
    // A record left by the block's earlier owner (given back without its record cleared) says
    // nothing of this node's: replaced at the revision read.
    const json held = json::parse(r->held->value, nullptr, false);
    const auto owner = held.is_object() ? held.find("node") : held.end();
    if (held.is_object() && owner != held.end() && owner->is_string() && *owner == node) {
        return Ok{};
    }
    auto replaced = etcd_.txn({{key, EtcdClient::Compare::Target::kMod, r->held->mod_revision}},
                              {{key, v.dump()}});
    if (!replaced) return replaced.error();
    return Ok{};
}

Status Waiting::clear_idle(const std::string& pool, const engine::Cidr& block) {
    auto r = etcd_.txn({}, {{keys::idle_block(prefix_, pool, block), std::nullopt}});
    if (!r) return r.error();
    return Ok{};
}

Expected<std::vector<IdleBlock>> Waiting::idle(const std::string& pool) {
    const std::string root = keys::idle(prefix_, pool);
    auto kvs = etcd_.get_prefix(root);
    if (!kvs) return kvs.error();
    std::vector<IdleBlock> out;
    for (const KeyValue& kv : *kvs) {
        const json v = json::parse(kv.value, nullptr, false);
        auto block = keys::block_of_name(kv.key.substr(root.size()));
        const auto since = number(v, "sinceUnixS");
        const auto node = v.is_object() ? v.find("node") : v.end();
        if (!block || !since || !v.is_object() || node == v.end() || !node->is_string()) continue;
        out.push_back({*block, node->get<std::string>(), *since});
    }
    return out;
}

}  // namespace shmipam::cluster
