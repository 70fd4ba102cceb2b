// Checking and making an operator's fixed claim (shmipamctl claims create and claims import):
// first what the state holds (read-only, without a lease, as every dry run reads), then the
// claim itself through the engine (engine/ops/claim_create.cpp).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "engine/addr/ip_address.h"
#include "tools/claim_target.h"

namespace shmipam::tools {

// One claim an operator asks for.
struct WantedClaim {
    PodName who;
    bool vm = false;
    std::string ifname = "eth0";
    std::vector<engine::IpAddress> addresses;  // one per range set at most; [0] picks the state
    uint64_t keep_idle = 0;                    // format.h, ClaimFields::keep_idle
};

// What an operator's claim is, or would be.
struct ClaimPlan {
    std::string state;  // the network, or pool/<name>
    std::string key;    // the claim key, as the plugin builds it
    WantedClaim wanted;
    // kCreate: nothing holds the name or the addresses; kPresent: the claim is there with these
    // addresses (nothing to do); kConflict: refused, `why` says who holds what.
    enum class Status { kCreate, kPresent, kConflict, kCreated } status = Status::kCreate;
    std::string why;
};

// What making `w` on `net` would do, from the state as it is (absent: created by the claim).
Expected<ClaimPlan> plan_claim(const ClaimNetwork& net, const WantedClaim& w);

// Makes a planned claim (status kCreate): kCreated, or kPresent/kConflict when the state changed
// since the plan (a pod's ADD came first).
Status apply_claim(const ClaimNetwork& net, ClaimPlan& plan);

}  // namespace shmipam::tools
