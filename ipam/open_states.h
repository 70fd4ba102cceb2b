// The pool states one pool-mode invocation opens (each pool or subnet has its own state, shared
// by every network config that selects it: ipam/pool_state.h), what an attachment holds in
// them, and keeping them until the process exits.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/ops/allocator.h"
#include "engine/state/network_store.h"
#include "ipam/request.h"
#include "pools/catalog.h"

namespace shmipam::ipam {

// One opened pool state: its config must outlive the store and the allocator that read it.
struct OpenState {
    std::string name;
    std::unique_ptr<engine::NetworkConfig> cfg;
    std::unique_ptr<engine::NetworkStore> store;

    engine::Allocator allocator() { return engine::Allocator(*store, *cfg); }
};

Expected<OpenState> open_state(std::string name, std::unique_ptr<engine::NetworkConfig> cfg);

// Opens every pool state of this node (to read or release, whatever the pools directory says
// now) into `opened`; one that cannot be opened is skipped and the first such error returned.
// `likely`: the states the caller expects (ipam/pool_state.h, pool_states).
std::optional<Error> open_every_state(const Request& r, const pools::Catalog& catalog,
                                      std::vector<OpenState>& opened,
                                      const std::vector<std::string>& likely = {});

// What the attachment holds in one state.
struct Holdings {
    std::string state;
    std::vector<engine::AllocatedAddress> addresses;
};

// Everything the attachment holds, in every pool state of this node (a repeated ADD, CHECK).
// `opened` keeps the stores (and the configs the addresses point into) alive.
Expected<std::vector<Holdings>> find_holdings(const Request& r, const pools::Catalog& catalog,
                                              std::vector<OpenState>& opened,
                                              const std::vector<std::string>& likely = {});

// The opened states go with the answer, kept until the process exits; one whose append reached
// a compaction check is compacted after the answer.
void keep_states(Upkeep& upkeep, std::vector<OpenState>& opened);

// Releases the local fixed claim `claim` (found by its key's fingerprint with `ifname`) in one
// state; one in use only with in_use_too.
Expected<size_t> release_fixed_claim(OpenState& s, const engine::ClaimSpec& claim,
                                     const std::string& ifname, bool in_use_too);

}  // namespace shmipam::ipam
