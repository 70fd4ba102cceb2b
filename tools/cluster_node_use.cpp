#include "tools/cluster_node_use.h"

#include <unistd.h>

#include <ctime>

#include "base/clock.h"
#include "engine/inspect/inspect.h"
#include "engine/ops/allocator.h"
#include "tools/verbs/verbs.h"

namespace shmipam::tools {

namespace {

// The two kinds of state a cluster pool's name may have (tools/verbs/common.cpp's names).
constexpr const char* kKinds[] = {"pool/", "subnet/"};

bool exists(const std::string& path) {
    return ::access(path.c_str(), F_OK) == 0;
}

std::string block_of(const engine::IpAddress& a, int prefix) {
    return engine::Cidr{engine::Cidr{a, prefix}.network(), prefix}.to_string();
}

}  // namespace

bool NodeStates::has_pool_state(const std::string& pool) {
    for (const char* kind : kKinds) {
        // The arena in runDir, the journal in dataDir: an ADD makes both when it opens the pool.
        if (exists(state_dir_of(run_dir_, kind + pool)) ||
            exists(state_dir_of(data_dir_, kind + pool))) {
            return true;
        }
    }
    return false;
}

cluster::PoolUse NodeStates::pool_use(const std::string& pool, int block_prefix) {
    using cluster::BlockUse;
    using cluster::PoolUse;
    PoolUse out;
    bool journal = false;
    for (const char* kind : kKinds) {
        const std::string name = kind + pool;
        journal = journal || exists(state_dir_of(data_dir_, name));
        if (!exists(state_dir_of(run_dir_, name))) continue;
        out.arenas.push_back(state_dir_of(run_dir_, name));
        auto store = open_network(run_dir_, name, shm::Access::kReadOnly);
        auto d = store ? engine::dump(**store) : Expected<engine::NetworkDump>(store.error());
        if (!d) {
            out.found = PoolUse::Found::kUnknown;
            out.why = "state " + name + " cannot be read: " + d.error().msg;
            return out;
        }
        // Release times are CLOCK_BOOTTIME: turned into wall seconds against both clocks now.
        const uint64_t now_boot = base::boot_ns();
        const uint64_t now_unix = uint64_t(std::time(nullptr));
        for (const auto& b : d->blocks) {
            if (auto c = engine::Cidr::parse(b.cidr))
                out.blocks[block_of(c->address, block_prefix)];
        }
        for (const auto& slot : d->slots) {
            BlockUse& u = out.blocks[block_of(slot.address, block_prefix)];
            if (slot.state != "cooling") {
                ++u.in_use;
            } else if (slot.released_boot_ns != 0 && slot.released_boot_ns <= now_boot) {
                const uint64_t ago_s = (now_boot - slot.released_boot_ns) / 1'000'000'000;
                const uint64_t at = now_unix > ago_s ? now_unix - ago_s : 0;
                u.last_release_unix_s = std::max(u.last_release_unix_s, at);
            }
        }
    }
    if (!out.arenas.empty()) {
        out.found = PoolUse::Found::kArenas;
    } else if (journal) {
        out.found = PoolUse::Found::kUnknown;
        out.why = "the pool's journal is in " + data_dir_ + " but no state in " + run_dir_;
    }
    return out;
}

std::vector<engine::ClaimView> NodeStates::claims_held(const std::string& pool) {
    // Fixed claims are made in the pool's own state (pool/<name>).
    auto store = open_network(run_dir_, "pool/" + pool, shm::Access::kReadOnly);
    if (!store) return {};  // no state of the pool on this node
    engine::NetworkConfig none;
    return engine::Allocator(**store, none).claims();
}

}  // namespace shmipam::tools
