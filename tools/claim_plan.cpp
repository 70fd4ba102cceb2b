#include "tools/claim_plan.h"

#include <unistd.h>

#include <algorithm>

#include "engine/inspect/inspect.h"
#include "engine/ops/allocator.h"
#include "engine/ops/open_network.h"
#include "shm/index_file.h"

namespace shmipam::tools {

namespace {

bool same_addresses(std::vector<engine::IpAddress> a, std::vector<engine::IpAddress> b) {
    auto less = [](const engine::IpAddress& x, const engine::IpAddress& y) {
        return x.to_string() < y.to_string();
    };
    std::sort(a.begin(), a.end(), less);
    std::sort(b.begin(), b.end(), less);
    return a == b;
}

// Who holds a slot, as an operator reads it.
std::string holder_of(const engine::SlotView& s) {
    if (s.claim) return "the claim " + s.container_id + (s.pod.empty() ? "" : " of " + s.pod);
    return s.state + " by container " + s.container_id + " " + s.ifname +
           (s.pod.empty() ? "" : " (pod " + s.pod + ")");
}

}  // namespace

Expected<ClaimPlan> plan_claim(const ClaimNetwork& net, const WantedClaim& w) {
    if (w.addresses.empty()) return make_error(Code::kInvalidConfig, "a claim needs an address");
    auto target = claim_target(net, w.addresses[0]);
    if (!target) return target.error();
    for (size_t k = 1; k < w.addresses.size(); ++k) {
        auto other = claim_target(net, w.addresses[k], target->state);
        if (!other) return other.error();
    }
    ClaimPlan plan{target->state, claim_key(w.who, w.ifname, w.vm), w};
    const std::string dir = target->cfg->state_dir();
    if (::access((dir + "/" + shm::IndexFile::kFileName).c_str(), F_OK) != 0) return plan;
    auto store = engine::NetworkStore::open_existing(dir, shm::Access::kReadOnly);
    if (!store) return store.error();
    engine::NetworkConfig none;
    const engine::Fingerprint fp = engine::fingerprint(plan.key, w.ifname);
    for (const engine::ClaimView& c : engine::Allocator(**store, none).claims()) {
        if (c.fp != fp) continue;
        if (same_addresses(c.addresses, w.addresses)) {
            plan.status = ClaimPlan::Status::kPresent;
            return plan;
        }
        plan.status = ClaimPlan::Status::kConflict;
        plan.why = "the claim " + plan.key + " exists in " + plan.state + " with " +
                   engine::addresses_text(c.addresses);
        return plan;
    }
    auto d = engine::dump(**store);
    if (!d) return d.error();
    for (const engine::SlotView& s : d->slots) {
        if (std::find(w.addresses.begin(), w.addresses.end(), s.address) == w.addresses.end()) {
            continue;
        }
        // Cooling: the engine decides when the claim is made (claimable once the cool-down
        // passed); reserved: never held by anyone.
        if (s.state == "free" || s.state == "reserved" || s.state == "cooling") continue;
        plan.status = ClaimPlan::Status::kConflict;
        plan.why = s.address.to_string() + " in " + plan.state + " is held: " + holder_of(s);
        return plan;
    }
    return plan;
}

Status apply_claim(const ClaimNetwork& net, ClaimPlan& plan) {
    auto target = claim_target(net, plan.wanted.addresses[0], plan.state);
    if (!target) return target.error();
    auto store = engine::open_network(*target->cfg);
    if (!store) return store.error();
    engine::AddRequest req;
    req.key.ifname = plan.wanted.ifname;
    req.requested = plan.wanted.addresses;
    req.pod = {plan.wanted.who.namespace_, plan.wanted.who.name};
    req.network_tag = target->network_tag;
    req.claim = engine::ClaimSpec{plan.key, plan.wanted.keep_idle};
    auto out = engine::Allocator(**store, *target->cfg).create_idle_claim(req);
    if (!out) {
        plan.status = ClaimPlan::Status::kConflict;
        plan.why = out.error().msg;
        return Ok{};
    }
    std::vector<engine::IpAddress> got;
    for (const auto& a : out->addresses) got.push_back(a.address);
    if (!out->existing) {
        plan.status = ClaimPlan::Status::kCreated;
        plan.wanted.addresses = got;  // with the next-fit address of any range set not asked for
    } else if (std::all_of(plan.wanted.addresses.begin(), plan.wanted.addresses.end(),
                           [&](const engine::IpAddress& a) {
                               return std::find(got.begin(), got.end(), a) != got.end();
                           })) {
        plan.status = ClaimPlan::Status::kPresent;
    } else {
        plan.status = ClaimPlan::Status::kConflict;
        plan.why =
            "the claim " + plan.key + " was made meanwhile with " + engine::addresses_text(got);
    }
    return Ok{};
}

}  // namespace shmipam::tools
