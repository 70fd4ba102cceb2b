#include "cluster/waiting.h"

#include <ctime>
#include <nlohmann/json.hpp>

#include "cluster/address_ranges.h"
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

bool Waiter::could_use(const engine::Cidr& block) const {
    return serves(usable, block);
}

Status Waiting::mark_waiting(const std::string& pool, const std::string& node,
                             const std::vector<protocol::AddressRange>& usable) {
    json ranges = json::array();
    for (const auto& r : usable) ranges.push_back(r.first.to_string() + "-" + r.last.to_string());
    // A put, not a compare: only `node` writes its record, and each write is its latest try.
    auto r = kv_.put(keys::waiter(prefix_, pool, node),
                     json{{"lastUnixS", now_unix_s()}, {"usable", ranges}}.dump());
    if (!r) return r.error();
    return Ok{};
}

Status Waiting::clear_waiting(const std::string& pool, const std::string& node) {
    auto r = kv_.txn({}, {{keys::waiter(prefix_, pool, node), std::nullopt}});
    if (!r) return r.error();
    return Ok{};
}

std::optional<Waiter> parse_waiter(const std::string& node, const KeyValue& kv, uint64_t now) {
    const json v = json::parse(kv.value, nullptr, false);
    const auto last = number(v, "lastUnixS");
    if (!last || *last + kWaitingFreshS < now) return std::nullopt;
    Waiter w{node, *last, {}};
    const auto ranges = v.find("usable");
    if (ranges != v.end() && ranges->is_array()) {
        for (const auto& r : *ranges) {
            const std::string text = r.is_string() ? r.get<std::string>() : "";
            const size_t dash = text.find('-');
            auto first = engine::IpAddress::parse(text.substr(0, dash));
            auto to =
                dash == std::string::npos ? first : engine::IpAddress::parse(text.substr(dash + 1));
            if (first && to) w.usable.push_back({*first, *to});
        }
    }
    return w;
}

std::optional<IdleBlock> parse_idle(const std::string& block_name, const KeyValue& kv) {
    const json v = json::parse(kv.value, nullptr, false);
    auto block = keys::block_of_name(block_name);
    const auto since = number(v, "sinceUnixS");
    const auto node = v.is_object() ? v.find("node") : v.end();
    if (!block || !since || !v.is_object() || node == v.end() || !node->is_string()) {
        return std::nullopt;
    }
    return IdleBlock{*block, node->get<std::string>(), *since};
}

Expected<std::vector<Waiter>> Waiting::waiters(const std::string& pool, uint64_t now) {
    const std::string root = keys::waiting(prefix_, pool);
    auto kvs = kv_.get_prefix(root);
    if (!kvs) return kvs.error();
    std::vector<Waiter> out;
    for (const KeyValue& kv : *kvs) {
        if (auto w = parse_waiter(kv.key.substr(root.size()), kv, now))
            out.push_back(std::move(*w));
    }
    return out;
}

Status Waiting::mark_idle(const std::string& pool, const engine::Cidr& block,
                          const std::string& node, uint64_t since_unix_s) {
    const json v{{"node", node}, {"sinceUnixS", since_unix_s}};
    const std::string key = keys::idle_block(prefix_, pool, block);
    auto r = kv_.create_if_absent(key, v.dump());
    if (!r) return r.error();
    if (r->created || !r->held) return Ok{};
    // A record left by the block's earlier owner (given back without its record cleared) says
    // nothing of this node's, and one of this node's from before the block's last use says
    // too much: both replaced at the revision read.
    const json held = json::parse(r->held->value, nullptr, false);
    const auto owner = held.is_object() ? held.find("node") : held.end();
    const auto since = number(held, "sinceUnixS");
    if (held.is_object() && owner != held.end() && owner->is_string() && *owner == node && since &&
        *since >= since_unix_s) {
        return Ok{};
    }
    auto replaced =
        kv_.txn({{key, KvStore::Compare::Target::kMod, r->held->mod_revision}}, {{key, v.dump()}});
    if (!replaced) return replaced.error();
    return Ok{};
}

Status Waiting::clear_idle(const std::string& pool, const engine::Cidr& block) {
    auto r = kv_.txn({}, {{keys::idle_block(prefix_, pool, block), std::nullopt}});
    if (!r) return r.error();
    return Ok{};
}

Expected<std::vector<IdleBlock>> Waiting::idle(const std::string& pool) {
    const std::string root = keys::idle(prefix_, pool);
    auto kvs = kv_.get_prefix(root);
    if (!kvs) return kvs.error();
    std::vector<IdleBlock> out;
    for (const KeyValue& kv : *kvs) {
        if (auto i = parse_idle(kv.key.substr(root.size()), kv)) out.push_back(*i);
    }
    return out;
}

}  // namespace shmipam::cluster
