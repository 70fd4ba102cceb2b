#include "cluster/block_store.h"

#include <ctime>
#include <nlohmann/json.hpp>
#include <set>

#include "cluster/key_schema.h"
#include "engine/addr/fingerprint.h"

namespace shmipam::cluster {

using engine::Cidr;
using engine::IpAddress;
using nlohmann::json;

std::optional<Block> BlockStore::parse(const KeyValue& kv) {
    const size_t slash = kv.key.rfind('/');
    auto cidr = keys::block_of_name(kv.key.substr(slash == std::string::npos ? 0 : slash + 1));
    const json v = json::parse(kv.value, nullptr, false);
    if (!cidr || !v.is_object()) return std::nullopt;
    // A field of another type reads as absent (a value written by hand): never a throw.
    const auto text = [&](const char* k) {
        const auto it = v.find(k);
        return it != v.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    const auto claimed = v.find("claimedUnixS");
    const auto node = v.find("node");
    if (node == v.end() || !node->is_string()) return std::nullopt;  // whose it is, unreadable
    Block b;
    b.cidr = *cidr;
    b.node = text("node");
    b.nonce = text("nonce");
    b.claimed_unix_s = claimed != v.end() && claimed->is_number_unsigned()
                           ? claimed->get<uint64_t>()
                           : uint64_t{0};
    b.mod_revision = kv.mod_revision;
    return b;
}

std::string BlockStore::key_of(const std::string& pool, const Cidr& block) const {
    return keys::block(prefix_, pool, block);
}

Expected<std::vector<Block>> BlockStore::blocks(const std::string& pool) {
    auto kvs = etcd_.get_prefix(keys::blocks(prefix_, pool));
    if (!kvs) return kvs.error();
    std::vector<Block> out;
    for (const KeyValue& kv : *kvs) {
        if (auto b = parse(kv)) out.push_back(*b);
    }
    return out;
}

Expected<std::map<std::string, std::vector<Block>>> BlockStore::all_blocks(
    std::vector<std::string>* unreadable) {
    auto kvs = etcd_.get_prefix(keys::pools(prefix_));
    if (!kvs) return kvs.error();
    std::map<std::string, std::vector<Block>> out;
    for (const KeyValue& kv : *kvs) {
        // The pools' meta keys, claims and addresses are not blocks.
        auto k = keys::split(prefix_, kv.key, keys::kBlocks);
        if (!k) continue;
        if (auto b = parse(kv)) {
            out[k->pool].push_back(*b);
        } else if (unreadable != nullptr) {
            unreadable->push_back(kv.key);
        }
    }
    return out;
}

std::vector<Cidr> BlockStore::claim_order(const Cidr& pool_cidr, int block_prefix,
                                          const std::string& node) {
    std::vector<Cidr> out;
    if (block_prefix < pool_cidr.prefix || block_prefix > pool_cidr.address.bits()) return out;
    const int bits = block_prefix - pool_cidr.prefix;
    // An IPv6 /64 cut into /122 blocks has 2^58 of them: a node tries at most kMaxTried from
    // its start (that so many in a row are all taken is not a case worth waiting for).
    constexpr uint64_t kMaxTried = 4096;
    const engine::u128 count = engine::u128{1} << bits;
    const engine::Fingerprint h = engine::fingerprint(node, "blocks");
    const engine::u128 start = ((engine::u128{h.fp2} << 64) | h.fp1) % count;
    const engine::u128 step = engine::u128{1} << (pool_cidr.address.bits() - block_prefix);
    const IpAddress base = pool_cidr.network();
    const uint64_t n = count < kMaxTried ? uint64_t(count) : kMaxTried;
    for (uint64_t k = 0; k < n; ++k) {
        const engine::u128 i = (start + k) % count;
        out.push_back(Cidr{IpAddress{base.value + step * i, base.family}, block_prefix});
    }
    return out;
}

Status BlockStore::check_geometry(const std::string& pool, const Cidr& pool_cidr,
                                  int block_prefix) {
    const json meta{{"cidr", Cidr{pool_cidr.network(), pool_cidr.prefix}.to_string()},
                    {"blockPrefix", block_prefix}};
    auto r = etcd_.create_if_absent(keys::meta(prefix_, pool), meta.dump());
    if (!r) return r.error();
    if (r->created || !r->held) return Ok{};
    const json held = json::parse(r->held->value, nullptr, false);
    if (held.is_object() && held.value("cidr", "") == meta["cidr"] &&
        held.value("blockPrefix", 0) == block_prefix) {
        return Ok{};
    }
    return make_error(Code::kInvalidConfig,
                      "pool " + pool + " is cut as " + r->held->value +
                          " in the cluster, and this node asks for " + meta.dump() +
                          ": every node must use the same pool CIDR and blockSize (blocks of "
                          "two sizes would overlap)");
}

Expected<std::optional<BlockStore::Geometry>> BlockStore::geometry(const std::string& pool) {
    auto kv = etcd_.get(keys::meta(prefix_, pool));
    if (!kv) return kv.error();
    if (!*kv) return std::optional<Geometry>{};
    return parse_geometry(**kv);
}

std::optional<BlockStore::Geometry> BlockStore::parse_geometry(const KeyValue& kv) {
    const json v = json::parse(kv.value, nullptr, false);
    const auto cidr = v.is_object() ? v.find("cidr") : v.end();
    const auto prefix = v.is_object() ? v.find("blockPrefix") : v.end();
    if (!v.is_object() || cidr == v.end() || !cidr->is_string() || prefix == v.end() ||
        !prefix->is_number_integer()) {
        return std::nullopt;
    }
    auto c = Cidr::parse(cidr->get<std::string>());
    if (!c) return std::nullopt;
    return Geometry{*c, prefix->get<int>()};
}

Expected<std::optional<Block>> BlockStore::try_claim(const std::string& pool, const Cidr& block,
                                                     const std::string& node) {
    const json value{
        {"node", node}, {"nonce", nonce()}, {"claimedUnixS", uint64_t(std::time(nullptr))}};
    auto r = etcd_.create_if_absent(key_of(pool, block), value.dump());
    if (!r) return r.error();
    if (!r->created) {
        if (r->held) return parse(*r->held);  // somebody's (maybe ours, from before)
        return std::optional<Block>{};
    }
    Block b;
    b.cidr = block;
    b.node = node;
    b.nonce = value["nonce"];
    b.claimed_unix_s = value["claimedUnixS"];
    b.mod_revision = r->revision;
    return std::optional<Block>{b};
}

Expected<std::optional<Block>> BlockStore::claim_next(
    const std::string& pool, const Cidr& pool_cidr, int block_prefix, const std::string& node,
    size_t max_blocks, bool* at_cap, const std::function<bool(const Cidr&)>& worth) {
    if (at_cap != nullptr) *at_cap = false;
    auto owned = blocks(pool);
    if (!owned) return owned.error();
    size_t mine = 0;
    std::vector<bool> taken;
    for (const Block& b : *owned) mine += b.node == node;
    if (mine >= max_blocks) {
        if (at_cap != nullptr) *at_cap = true;
        return std::optional<Block>{};
    }
    std::set<std::pair<int, engine::u128>> known;
    for (const Block& b : *owned)
        known.insert({int(b.cidr.address.family), b.cidr.network().value});
    for (const Cidr& c : claim_order(pool_cidr, block_prefix, node)) {
        if (known.count({int(c.address.family), c.network().value}) != 0) continue;
        if (worth && !worth(c)) continue;  // no allocatable address in it
        auto got = try_claim(pool, c, node);
        if (!got) return got.error();
        if (*got && (*got)->node == node) return got;
        // Lost the race for it: the next one.
    }
    return std::optional<Block>{};
}

Expected<Block> BlockStore::claim_holding(const std::string& pool, const Cidr& pool_cidr,
                                          int block_prefix, const IpAddress& address,
                                          const std::string& node, size_t max_blocks) {
    if (!pool_cidr.contains(address) || address.family != pool_cidr.address.family) {
        return make_error(
            Code::kRequestedAddressInvalid,
            address.to_string() + " is not in pool " + pool + " (" + pool_cidr.to_string() + ")");
    }
    const Cidr block{address, block_prefix};
    const Cidr exact{block.network(), block_prefix};
    if (max_blocks != SIZE_MAX) {
        auto owned = blocks(pool);
        if (!owned) return owned.error();
        size_t mine = 0;
        for (const Block& b : *owned) {
            if (b.node != node) continue;
            if (b.cidr.network() == exact.network() && b.cidr.prefix == exact.prefix) return b;
            ++mine;
        }
        if (mine >= max_blocks) {
            return make_error(Code::kNoAddressFree,
                              "node " + node + " holds its maximum of " +
                                  std::to_string(max_blocks) + " blocks of " + pool +
                                  " (ipam.maxBlocksPerNode): the block of the requested address " +
                                  address.to_string() + " would be one more");
        }
    }
    auto got = try_claim(pool, exact, node);
    if (!got) return got.error();
    if (!*got) return make_error(Code::kTryAgainLater, "the block changed while being claimed");
    if ((*got)->node != node) {
        return make_error(Code::kRequestedAddressTaken,
                          "requested IP address " + address.to_string() + " is in block " +
                              exact.to_string() + ", which node " + (*got)->node + " owns");
    }
    return **got;
}

Expected<bool> BlockStore::release(const std::string& pool, const Block& block) {
    return etcd_.delete_at(key_of(pool, block.cidr), block.mod_revision);
}

}  // namespace shmipam::cluster
