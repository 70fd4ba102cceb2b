#include "cluster/block_store.h"

#include <ctime>
#include <nlohmann/json.hpp>
#include <set>

#include "cluster/key_schema.h"
#include "cluster/node_name.h"
#include "cluster/pool_registry.h"
#include "engine/addr/fingerprint.h"

namespace shmipam::cluster {

using engine::Cidr;
using engine::IpAddress;
using nlohmann::json;

std::optional<Block> BlockStore::parse(const KeyValue& kv, const std::optional<Geometry>& g) {
    const size_t slash = kv.key.rfind('/');
    auto cidr = keys::block_of_name(kv.key.substr(slash == std::string::npos ? 0 : slash + 1));
    const json v = json::parse(kv.value, nullptr, false);
    if (!cidr || cidr->has_host_bits() || !v.is_object()) return std::nullopt;
    // A block of another size than the pool's, or outside it, is never read as one: a node
    // would allocate addresses another node's block holds (a hand-written "10.1.0.0-16").
    if (g &&
        (cidr->prefix != g->block_prefix || cidr->address.family != g->pool_cidr.address.family ||
         !g->pool_cidr.contains(cidr->address))) {
        return std::nullopt;
    }
    // Every field of its type: a value written by hand or damaged is skipped and reported, never
    // read with a default (an owner "" would be nobody's block) and never a throw.
    const auto node = v.find("node");
    const auto nonce_field = v.find("nonce");
    const auto claimed = v.find("claimedUnixS");
    if (node == v.end() || !node->is_string() || !is_node_name(node->get<std::string>()) ||
        nonce_field == v.end() || !nonce_field->is_string() || claimed == v.end() ||
        !claimed->is_number_unsigned()) {
        return std::nullopt;
    }
    Block b;
    b.cidr = *cidr;
    b.node = node->get<std::string>();
    b.nonce = nonce_field->get<std::string>();
    b.claimed_unix_s = claimed->get<uint64_t>();
    b.mod_revision = kv.mod_revision;
    return b;
}

std::string BlockStore::key_of(const std::string& pool, const Cidr& block) const {
    return keys::block(prefix_, pool, block);
}

Expected<std::vector<Block>> BlockStore::blocks(const std::string& pool,
                                                std::vector<std::string>* unreadable) {
    auto g = geometry(pool);
    if (!g) return g.error();
    return blocks_cut_as(pool, *g, unreadable);
}

Expected<std::vector<Block>> BlockStore::blocks_cut_as(const std::string& pool,
                                                       const std::optional<Geometry>& g,
                                                       std::vector<std::string>* unreadable) {
    auto kvs = kv_.get_prefix(keys::blocks(prefix_, pool));
    if (!kvs) return kvs.error();
    std::vector<Block> out;
    for (const KeyValue& kv : *kvs) {
        if (auto b = parse(kv, g)) {
            out.push_back(*b);
        } else if (unreadable != nullptr) {
            unreadable->push_back(kv.key);
        }
    }
    return out;
}

Expected<std::map<std::string, std::vector<Block>>> BlockStore::all_blocks(
    std::vector<std::string>* unreadable) {
    auto kvs = kv_.get_prefix(keys::pools(prefix_));
    if (!kvs) return kvs.error();
    return blocks_by_pool(prefix_, *kvs, unreadable);
}

std::map<std::string, std::optional<BlockStore::Geometry>> BlockStore::geometries(
    const std::string& prefix, const std::vector<KeyValue>& kvs) {
    std::map<std::string, std::optional<Geometry>> out;
    for (const KeyValue& kv : kvs) {
        auto k = keys::split(prefix, kv.key, keys::kMeta);
        if (k && k->rest.empty()) out[k->pool] = parse_geometry(kv);
    }
    return out;
}

std::map<std::string, std::vector<Block>> BlockStore::blocks_by_pool(
    const std::string& prefix, const std::vector<KeyValue>& kvs,
    std::vector<std::string>* unreadable) {
    // Each pool's geometry first (its meta sorts after its blocks), to read its blocks by.
    const auto geometry_of = geometries(prefix, kvs);
    std::map<std::string, std::vector<Block>> out;
    for (const KeyValue& kv : kvs) {
        // The pools' meta keys, claims and addresses are not blocks.
        auto k = keys::split(prefix, kv.key, keys::kBlocks);
        if (!k) continue;
        const auto g = geometry_of.find(k->pool);
        if (auto b = parse(kv, g == geometry_of.end() ? std::nullopt : g->second)) {
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
    return register_pool(kv_, prefix_, pool, pool_cidr, block_prefix);
}

Expected<std::optional<BlockStore::Geometry>> BlockStore::geometry(const std::string& pool) {
    auto kv = kv_.get(keys::meta(prefix_, pool));
    if (!kv) return kv.error();
    if (!*kv) return std::optional<Geometry>{};
    return parse_geometry(**kv);
}

std::optional<BlockStore::Geometry> BlockStore::parse_geometry(const KeyValue& kv) {
    auto m = parse_meta("", kv.value);
    if (!m) return std::nullopt;
    return Geometry{m->cidr, m->block_prefix};
}

Expected<std::optional<Block>> BlockStore::try_claim(const std::string& pool, const Cidr& block,
                                                     const std::string& node) {
    const json value{
        {"node", node}, {"nonce", nonce()}, {"claimedUnixS", uint64_t(std::time(nullptr))}};
    auto r = kv_.create_if_absent(key_of(pool, block), value.dump());
    if (!r) return r.error();
    if (!r->created) {
        if (r->held) return parse(*r->held, std::nullopt);  // somebody's (maybe ours, before)
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
    // Read as the caller cuts the pool (its registration checked before: no meta read again).
    auto owned =
        blocks_cut_as(pool, Geometry{Cidr{pool_cidr.network(), pool_cidr.prefix}, block_prefix});
    if (!owned) return owned.error();
    size_t mine = 0;
    for (const Block& b : *owned) mine += b.node == node;
    if (mine >= max_blocks) {
        if (at_cap != nullptr) *at_cap = true;
        return std::optional<Block>{};
    }
    // A block overlapping one the store holds is taken, whatever the sizes (blocks are all of
    // the registered size, but a block's size is never trusted to say what it covers).
    const auto taken = [&](const Cidr& c) {
        for (const Block& b : *owned) {
            if (cidrs_overlap(b.cidr, c)) return true;
        }
        return false;
    };
    for (const Cidr& c : claim_order(pool_cidr, block_prefix, node)) {
        if (taken(c)) continue;
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
        auto owned = blocks_cut_as(
            pool, Geometry{Cidr{pool_cidr.network(), pool_cidr.prefix}, block_prefix});
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
    return kv_.delete_at(key_of(pool, block.cidr), block.mod_revision);
}

}  // namespace shmipam::cluster
