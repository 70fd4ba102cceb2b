#include "cluster/give_back_rule.h"

#include "cluster/block_store.h"

namespace shmipam::cluster {

std::set<std::string> free_blocks_for(const Waiter& w, const engine::Cidr& pool_cidr,
                                      int block_prefix, const std::set<std::string>& claimed,
                                      size_t enough) {
    std::set<std::string> out;
    // The order the waiter's own claim tries (bounded as its claim is, in huge IPv6 pools).
    for (const engine::Cidr& b : BlockStore::claim_order(pool_cidr, block_prefix, w.node)) {
        if (out.size() >= enough) break;
        if (claimed.count(b.to_string()) != 0 || !w.could_use(b)) continue;
        out.insert(b.to_string());
    }
    return out;
}

size_t waiters_unserved(const std::vector<std::set<std::string>>& free_per_waiter) {
    size_t none = 0, some = 0;
    std::set<std::string> shared;
    for (const auto& blocks : free_per_waiter) {
        if (blocks.empty()) {
            ++none;
        } else {
            ++some;
            shared.insert(blocks.begin(), blocks.end());
        }
    }
    // Waiters that each could claim some block, but fewer blocks than they: the rest unserved.
    return none + (some > shared.size() ? some - shared.size() : 0);
}

bool gives_back(const std::string& node, const std::set<std::string>& holders, size_t unserved) {
    size_t rank = 0;
    for (const std::string& h : holders) {
        if (rank >= unserved) return false;
        if (h == node) return true;
        ++rank;
    }
    return false;
}

}  // namespace shmipam::cluster
