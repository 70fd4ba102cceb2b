#include "cluster/block_release.h"

#include <ctime>

#include "cluster/block_cache.h"
#include "cluster/node_files.h"
#include "cluster/release_due.h"
#include "engine/ops/allocator.h"

namespace shmipam::cluster {

using protocol::ReleaseAnswer;

namespace {

ReleaseAnswer kept(const std::string& why) {
    return {std::nullopt, why};
}

// What every give-back checks first: the store still gives the block to the node, the node
// keeps another block of the pool (unless even_last), and the block is min_age_s old. `block`
// is the block as the store has it and `others` the node's other blocks of the pool; or
// `refused` says why not (the mark removed, or moved to when the block is old enough).
struct Checked {
    const Block* block = nullptr;
    std::vector<OwnedBlock> others;
    std::optional<ReleaseAnswer> refused;
};
Checked check(const protocol::ReleaseBlock& r, const std::vector<Block>& owned, uint64_t now) {
    Checked c;
    for (const Block& b : owned) {
        if (b.node != r.scope.node) continue;
        if (b.cidr.to_string() == r.block.to_string()) {
            c.block = &b;
        } else {
            c.others.push_back({b.cidr, b.mod_revision});
        }
    }
    const auto forget = [&](const std::string& why) {
        remove_release_due(r.scope.state_dir, r.scope.pool, r.block);
        c.refused = kept(why);
        return c;
    };
    if (c.block == nullptr) return forget("not this node's block in the store");
    if (c.others.empty() && !r.even_last)
        return forget("the node's last block of the pool is kept");
    if (now < c.block->claimed_unix_s + r.min_age_s) {
        write_release_due(r.scope.state_dir, r.scope.pool, r.block,
                          c.block->claimed_unix_s + r.min_age_s);
        c.refused = kept("younger than blockMinAgeS");
    }
    return c;
}

}  // namespace

Expected<ReleaseAnswer> release_block(const protocol::ReleaseBlock& r, BlockStore& store,
                                      const std::vector<Block>& owned) {
    const uint64_t now = uint64_t(std::time(nullptr));
    const auto forget = [&](const std::string& why) {
        remove_release_due(r.scope.state_dir, r.scope.pool, r.block);
        return kept(why);
    };
    const Checked c = check(r, owned, now);
    if (c.refused) return *c.refused;
    auto arena = engine::NetworkStore::open_existing(r.pool_state, shm::Access::kReadWrite);
    if (!arena) return forget("no arena of the pool on this node: " + arena.error().msg);
    (*arena)->act_as_invocation();
    // The hold covers one arena block: it must be the cluster's block.
    if ((*arena)->block_prefix(r.block.address.family) != r.block.prefix) {
        return forget("the arena's blocks are not /" + std::to_string(r.block.prefix));
    }
    engine::NetworkConfig cfg;
    cfg.reuse_delay_ms = (*arena)->reuse_delay_ms();
    engine::Allocator alloc(**arena, cfg);
    const std::string cache = block_cache_path(r.scope.state_dir, r.scope.pool);
    bool deleted = false;
    auto held = alloc.while_block_empty(r.block.network(), [&]() -> Status {
        // First out of the cache (ADDs stop choosing it; an ADD that chose it before and takes
        // an address once the block is let go finds it gone from the cache, and gives the
        // address back), then out of the store. A crash between the two leaves a block the
        // store gives the node and its cache lacks: the next helper adopts it.
        if (auto st = write_block_cache(cache, c.others); !st) return st;
        auto done = store.release(r.scope.pool, *c.block);
        if (!done) {
            // The delete may have been committed with its answer lost: the block stays out of
            // the cache (never allocated from), and if the store still gives it to this node,
            // the next helper run adopts it.
            return done.error();
        }
        deleted = *done;
        return Ok{};
    });
    if (!held) {
        write_release_due(r.scope.state_dir, r.scope.pool, r.block, now + uint64_t(kReleaseRetryS));
        return held.error();
    }
    if (held->in_use) return forget("an address of it is in use again");
    if (held->cooling_left_ms != 0) {
        write_release_due(r.scope.state_dir, r.scope.pool, r.block,
                          now + (held->cooling_left_ms + 999) / 1000);
        return kept("an address of it is still cooling");
    }
    if (!deleted) return forget("the block changed in the store since it was read");
    remove_release_due(r.scope.state_dir, r.scope.pool, r.block);
    return ReleaseAnswer{r.block, "empty"};
}

Expected<ReleaseAnswer> release_unused_block(const protocol::ReleaseBlock& r, BlockStore& store,
                                             const std::vector<Block>& owned,
                                             const std::function<bool()>& state_made) {
    const uint64_t now = uint64_t(std::time(nullptr));
    const Checked c = check(r, owned, now);
    if (c.refused) return *c.refused;
    const std::string cache = block_cache_path(r.scope.state_dir, r.scope.pool);
    // First out of the cache, as with an arena. An ADD makes the pool's state before it takes
    // an address, and reads the cache again after it took one: an ADD that made the state
    // before the look below is seen by it, and one that makes it after takes its address
    // after the cache lost the block, and gives the address back.
    if (auto st = write_block_cache(cache, c.others); !st) return st.error();
    if (state_made()) {
        std::vector<OwnedBlock> all = c.others;
        all.push_back({c.block->cidr, c.block->mod_revision});
        (void)write_block_cache(cache, all);  // else the next helper adopts it
        return kept("an ADD made the pool's state on this node meanwhile");
    }
    auto done = store.release(r.scope.pool, *c.block);
    if (!done) return done.error();  // out of the cache; adopted again if the store keeps it
    remove_release_due(r.scope.state_dir, r.scope.pool, r.block);
    if (!*done) return kept("the block changed in the store since it was read");
    return ReleaseAnswer{r.block, "never used on this node"};
}

}  // namespace shmipam::cluster
