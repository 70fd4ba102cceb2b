// Pool mode's ADD (docs/pools.md, "Allocation"; docs/cluster.md for the cluster source):
//   1. the pod's fixed claim, if it has one, and the candidate pools by the pools/ rules;
//   2. a repeated ADD answers what the attachment holds (let go first where the source no longer
//      serves it: a block taken from the node);
//   3. each family in turn: its candidate pools in order, falling through past one that cannot
//      serve; in a pool, rounds of attempts over the source's places, making room between
//      rounds; a family that cannot be served undoes the families before it;
//   4. a fixed claim the pod has in another pool state is released (its pool changed).
// And the ADD the API server's absence leaves: binding the pod's exact-name claim this node holds
// (pool_bind_held_claim).
#include <memory>
#include <set>

#include "engine/addr/fingerprint.h"
#include "engine/state/config_display.h"
#include "ipam/fixed_claim.h"
#include "ipam/open_states.h"
#include "ipam/pool_mode.h"
#include "ipam/pool_state.h"
#include "pools/selection.h"

namespace shmipam::ipam {

using engine::Family;
using engine::IpAddress;
using nlohmann::json;

namespace {

struct Answered {
    std::string state;
    engine::AllocatedAddress address;
};

json route_json(const std::string& dst, const std::string& gw) {
    json route{{"dst", dst}};
    if (!gw.empty()) route["gw"] = gw;
    return route;
}

// Each address with its pool's prefix and gateway; routes: the config's, each pool's, a default
// route through each gateway unless clean_gateway, the pod's annotation's.
AddResult pool_result(const Request& r, const pools::Catalog& catalog,
                      const std::vector<Answered>& addrs, bool clean_gateway,
                      const std::vector<pools::Route>& annotation_routes) {
    AddResult out;
    out.routes = r.routes.is_array() ? r.routes : json::array();
    auto add_route = [&](json route) {
        for (const auto& have : out.routes) {
            if (have == route) return;
        }
        out.routes.push_back(std::move(route));
    };
    for (const auto& a : addrs) {
        const pools::AddressSpec* object = object_of(a.state, catalog);
        const auto gateway = object != nullptr ? object->gateway : std::nullopt;
        out.ips.push_back({a.address.address, a.address.range->subnet.prefix, gateway});
        if (object != nullptr) {
            for (const auto& route : object->routes) add_route(route_json(route.dst, route.gw));
        }
        if (gateway && !clean_gateway) {
            add_route(route_json(gateway->family == Family::kV4 ? "0.0.0.0/0" : "::/0",
                                 gateway->to_string()));
        }
    }
    for (const auto& route : annotation_routes) add_route(route_json(route.dst, route.gw));
    return out;
}

// The pod's local fixed claim in this state, when its address was excluded or reserved since it
// was made (the pool's allocatable set no longer holds it): the pod kept it while it ran; now
// that it starts again the fixed claim is released, and the ADD takes an allocatable address.
Status drop_unusable_claim(OpenState& s, const engine::ClaimSpec& claim, const std::string& ifname,
                           const pools::IpSet& usable) {
    auto held = s.allocator().addresses_of({claim.key, ifname});
    bool unusable = !held && held.error().code == Code::kInvalidConfig;  // outside the ranges
    for (const auto& a : held ? *held : std::vector<engine::AllocatedAddress>{}) {
        unusable = unusable || !usable.contains(a.address);
    }
    if (!unusable) return Ok{};
    // One in use (by an older sandbox the runtime has not deleted yet) is kept while it runs.
    auto released = release_fixed_claim(s, claim, ifname, /*in_use_too=*/false);
    if (!released) return released.error();
    return Ok{};
}

// A candidate pool of one family, chosen: where its addresses come from and its state's name.
struct Choice {
    const pools::Candidate& candidate;
    const pools::AddressSpec& object;
    std::string state;
    PoolTarget target;
};

enum class Attempt { kServed, kFull, kGivenBack };

// One ADD's allocations across the families of a selection: the stores it opened, what it
// holds, how to undo it.
struct FamilyAdd {
    const Request& r;
    const pools::Catalog& catalog;
    AddressSource& source;
    std::vector<OpenState>& opened;
    engine::AddRequest request;  // its key's ifname is the NIC in messages
    std::string rule;            // the rule that gave the candidates, for messages
    std::vector<Answered> answered;
    std::vector<size_t> holding;           // indexes into `opened` where the attachment is held
    std::vector<size_t> new_fixed_claims;  // of `holding`: where a fixed claim was made anew
    bool try_again_later = false;          // a pool's source will have room soon
    bool claim_by_default = false;         // ipam/fixed_claim.h

    // The store of `state` (the one find_holdings opened, if it did: a store does not keep the
    // config it was opened with, so that one's config is told the ranges it may now use).
    Expected<size_t> store_for(const Choice& ch, const pools::IpSet& usable) {
        for (size_t i = 0; i < opened.size(); ++i) {
            if (opened[i].name != ch.state) continue;
            allocate_from(*opened[i].cfg, ch.object.subnet, ch.object.gateway, usable);
            // Opened to read: now shown with the ranges it allocates from, as an allocating
            // open shows them (one comparison when unchanged).
            opened[i].cfg->display = engine::NetworkConfig::Display::kRecord;
            engine::record_config(opened[i].store->index().header(), *opened[i].cfg);
            return i;
        }
        auto st = open_state(
            ch.state, allocating_config(r, ch.state, ch.object.subnet, ch.object.gateway, usable));
        if (!st) return st.error();
        opened.push_back(std::move(*st));
        return opened.size() - 1;
    }

    // Records an allocation made in opened[at].
    void hold(size_t at, const engine::AddOutcome& added, const std::string& state) {
        if (request.claim && !added.existing) new_fixed_claims.push_back(at);
        holding.push_back(at);
        for (const auto& a : added.addresses) answered.push_back({state, a});
    }

    // One attempt over the source's places, in order.
    Expected<Attempt> attempt(const Choice& ch, const std::vector<pools::IpSet>& places,
                              const std::optional<IpAddress>& wanted) {
        for (const pools::IpSet& here : places) {
            if (here.empty() || (wanted && !here.contains(*wanted))) continue;
            auto at = store_for(ch, here);
            if (!at) return at.error();
            OpenState& s = opened[*at];
            engine::AddRequest req = request;
            if (wanted) req.requested = {*wanted};
            if (req.claim) {
                if (auto st = drop_unusable_claim(s, *req.claim, req.key.ifname, here); !st) {
                    return st.error();
                }
            }
            auto added = s.allocator().add(req);
            if (!added) {
                if (added.error().code != Code::kNoAddressFree) return added.error();
                continue;
            }
            // A place the source stopped serving while this ADD chose it (a block given back) is
            // out of the source before its slots are let go: an address taken in it is given
            // back, and the ADD looks again. (Left held, a retried ADD would answer it.)
            if (!added->existing && !source.still_serves(ch.candidate.name, added->addresses)) {
                if (auto st = s.allocator().del(req.key); !st) return st.error();
                if (req.claim) (void)release_fixed_claim(s, *req.claim, req.key.ifname, true);
                return Attempt::kGivenBack;
            }
            if (!added->existing) source.after_allocation(ch.target, places, *s.store);
            hold(*at, *added, ch.state);
            return Attempt::kServed;
        }
        return Attempt::kFull;
    }

    // Rounds of attempts in one pool, the source making room between them: true when served,
    // false with a reason when the pool cannot serve.
    Expected<bool> fill(const Choice& ch, const std::optional<IpAddress>& wanted,
                        std::vector<std::string>& reasons) {
        for (int round = 1;; ++round) {
            auto places = source.places(ch.target, request.claim.has_value());
            if (!places) return places.error();
            auto a = attempt(ch, *places, wanted);
            if (!a) return a.error();
            if (*a == Attempt::kServed) return true;
            const bool last = round >= source.fill_rounds();
            if (*a == Attempt::kGivenBack) {
                if (!last) continue;
                return make_error(Code::kTryAgainLater,
                                  "this node's blocks of " + ch.candidate.name +
                                      " kept being given back during the ADD");
            }
            if (last) {
                reasons.push_back("all IP addresses used out of " + ch.candidate.name +
                                  source.where());
                return false;
            }
            std::string why;
            auto room = source.make_room(ch.target, wanted, &why);
            if (!room && room.error().code == Code::kTryAgainLater) {
                // Room is coming (another node's idle block): the next candidate may serve
                // meanwhile; if none does, the ADD answers 11 so that the runtime retries.
                reasons.push_back(room.error().msg);
                try_again_later = true;
                return false;
            }
            if (!room) return room.error();
            if (!*room) {
                reasons.push_back(why);
                return false;
            }
        }
    }

    // A pool whose addresses are taken one by one across nodes: the fixed claim's address from
    // the source, then held here by the local fixed claim, while the source's hold lasts.
    Expected<bool> serve_fixed(const Choice& ch, const std::optional<IpAddress>& wanted,
                               std::vector<std::string>& reasons) {
        auto take = source.take_fixed(ch.target, *request.claim, wanted);
        if (!take) {
            if (take.error().code != Code::kNoAddressFree &&
                take.error().code != Code::kRequestedAddressTaken) {
                return take.error();
            }
            reasons.push_back(take.error().msg);
            return false;
        }
        const IpAddress fixed = take->address;
        if (wanted && !(*wanted == fixed)) {
            reasons.push_back("the pod's fixed address in " + ch.candidate.name + " is " +
                              fixed.to_string() + ", not the requested " + wanted->to_string());
            return false;
        }
        pools::IpSet here(ch.target.usable.family());
        here.add(fixed.value, fixed.value);
        auto at = store_for(ch, here);
        if (!at) return at.error();
        OpenState& s = opened[*at];
        engine::AddRequest req = request;
        req.requested = {fixed};
        if (auto st = drop_unusable_claim(s, *req.claim, req.key.ifname, here); !st) {
            return st.error();
        }
        auto added = s.allocator().add(req);
        if (!added && (added.error().code == Code::kRequestedAddressTaken ||
                       added.error().code == Code::kNoAddressFree)) {
            // Held here by the idle local fixed claim of a pod that has since moved to another
            // node and given the address up there: the store gave it to this claim, so that
            // one lets go.
            (void)s.allocator().release_claims(
                [&](const engine::ClaimView& v) {
                    for (const auto& a : v.addresses) {
                        if (a == fixed) return true;
                    }
                    return false;
                },
                /*in_use_too=*/false, /*dry_run=*/false);
            added = s.allocator().add(req);
        }
        if (!added) return added.error();
        hold(*at, *added, ch.state);
        return true;
    }

    // Tries the family's pools in order, falling through past one that cannot serve. When none
    // can, an error that names every pool and why (100; 102 for a requested address); any other
    // error as it came.
    std::optional<Error> serve(const pools::FamilyPlan& fam,
                               const std::optional<IpAddress>& wanted) {
        std::vector<std::string> reasons, tried;
        for (const pools::Candidate& c : fam.order) {
            tried.push_back(c.name);
            const pools::IpSet usable = c.pool != nullptr ? pools::allocatable(*c.pool, catalog)
                                                          : pools::allocatable(*c.subnet, catalog);
            if (wanted && !usable.contains(*wanted)) {
                reasons.push_back("requested IP address " + wanted->to_string() +
                                  " is not allocatable in " + c.name);
                continue;
            }
            if (usable.empty()) {
                reasons.push_back("all IP addresses used out of " + c.name + " (none allocatable)");
                continue;
            }
            const pools::AddressSpec& object =
                c.pool != nullptr ? static_cast<const pools::AddressSpec&>(*c.pool) : *c.subnet;
            const Choice ch{c, object, state_name(c), PoolTarget{c.name, object.subnet, usable}};
            Expected<bool> served = false;
            if (source.fixed_across_nodes(c.name)) {
                if (!request.claim) {
                    reasons.push_back("IPPool " + c.name +
                                      " holds fixed addresses only (StatefulSet pods, "
                                      "statefulSetFixedIP)");
                    continue;
                }
                served = serve_fixed(ch, wanted, reasons);
            } else {
                source.prepare(ch.target);
                // A pod keeping its address by the StatefulSet default alone gets an ordinary
                // one where the source does not keep such claims.
                const std::optional<engine::ClaimSpec> claim = request.claim;
                if (claim_by_default && !source.keeps_default_claims(c.name)) request.claim.reset();
                served = fill(ch, wanted, reasons);
                request.claim = claim;
            }
            if (!served) return served.error();
            if (*served) return std::nullopt;
        }
        std::string why;
        for (const auto& reason : reasons) why += (why.empty() ? "" : ", ") + reason;
        for (const auto& f : fam.filtered) why += (why.empty() ? "" : ", ") + f.reason;
        return Error{try_again_later ? Code::kTryAgainLater
                     : wanted        ? Code::kRequestedAddressInvalid
                                     : Code::kNoAddressFree,
                     "failed to allocate any " + pools::family_name(fam.family) +
                         " IP address to NIC " + request.key.ifname + " from IPPools " +
                         pools::go_list(tried) + ": [" + why + "]",
                     "rule: " + rule};
    }

    void undo() {
        for (size_t i : holding) opened[i].allocator().del(request.key);
        // A fixed claim this ADD made for nothing is not kept for the name.
        for (size_t i : new_fixed_claims) {
            (void)release_fixed_claim(opened[i], *request.claim, request.key.ifname, true);
        }
    }
};

}  // namespace

Expected<AddResult> pool_add(const Request& r, const pools::Catalog& catalog, AddressSource& source,
                             Upkeep& upkeep) {
    std::vector<OpenState> opened;
    auto fixed = fixed_claim_of(r);
    if (!fixed) return fixed.error();
    const pools::Selection sel = pools::select_pools(catalog, pod_facts(r), r.pools->config);

    // A repeated ADD answers what the attachment holds, wherever it is (even in a pool since
    // edited out of the rules).
    std::vector<std::string> candidates;
    for (const pools::FamilyPlan& fam : sel.families) {
        for (const pools::Candidate& c : fam.order) candidates.push_back(state_name(c));
    }
    auto holdings = find_holdings(r, catalog, opened, candidates);
    if (!holdings) return holdings.error();
    // What the attachment holds where the source no longer serves it (an address in a block
    // taken from the node, by an ADD that could not give it back, retried) is let go, and the
    // ADD starts afresh.
    bool stale = false;
    for (const Holdings& h : *holdings) {
        stale = stale || !source.still_serves(object_name_of_state(h.state), h.addresses);
    }
    if (stale) {
        for (OpenState& s : opened) {
            if (auto st = s.allocator().del(r.key); !st) return st.error();
        }
        holdings->clear();
    }
    if (!holdings->empty()) {
        for (const Holdings& h : *holdings) {
            if (auto st = source.still_held(r, object_name_of_state(h.state), h.addresses); !st) {
                return st.error();
            }
        }
        std::vector<Answered> addrs;
        for (const Holdings& h : *holdings) {
            for (const auto& a : h.addresses) addrs.push_back({h.state, a});
        }
        AddResult out = pool_result(r, catalog, addrs, sel.clean_gateway, sel.annotation_routes);
        keep_states(upkeep, opened);
        return out;
    }
    if (sel.error) {
        Error e = *sel.error;
        if (e.details.empty()) e.details = "rule: " + pools::describe(sel.rule);
        return e;
    }

    // Each family in turn; a family that cannot be served undoes the ones before it.
    FamilyAdd add{
        r,
        catalog,
        source,
        opened,
        engine::AddRequest{r.key, {}, {r.pod.namespace_, r.pod.name}, network_tag(r.network.name)},
        pools::describe(sel.rule)};
    add.request.claim = *fixed;
    add.claim_by_default = fixed->has_value() && claim_by_default(r);
    for (const pools::FamilyPlan& fam : sel.families) {
        std::optional<IpAddress> wanted;
        for (const IpAddress& a : r.requested) {
            if (a.family == fam.family) wanted = a;
        }
        if (auto e = add.serve(fam, wanted)) {
            add.undo();
            return *e;
        }
    }
    // A fixed claim the pod has in another pool state is released: the pod's pool changed
    // (Spiderpool since v0.9.4). Every state of the node is open already (the repeated-ADD
    // check opened them), and each lookup is one probe of its index, so this runs at every ADD
    // with a fixed claim: one that died before it, or failed in it, is made good by the retry.
    if (fixed->has_value()) {
        std::set<std::string> serving;
        for (size_t i : add.holding) serving.insert(opened[i].name);
        for (OpenState& s : opened) {
            if (serving.count(s.name) != 0 || !s.store) continue;
            if (auto released = release_fixed_claim(s, **fixed, r.key.ifname, true); !released) {
                add.undo();
                return released.error();
            }
        }
    }
    AddResult out = pool_result(r, catalog, add.answered, sel.clean_gateway, sel.annotation_routes);
    keep_states(upkeep, opened);
    return out;
}

Expected<std::optional<HeldClaimBound>> pool_bind_held_claim(const Request& r,
                                                             const pools::Catalog& catalog,
                                                             AddressSource& source,
                                                             Upkeep& upkeep) {
    const pools::StickyIdentity who{pools::StickyKind::kStatefulSet, r.pod.namespace_, r.pod.name,
                                    r.key.ifname};
    const std::string key = who.key();
    const engine::Fingerprint fp = engine::fingerprint(key, r.key.ifname);
    std::vector<OpenState> opened;
    // A state that cannot be opened holds nothing this can bind; the others are looked at.
    (void)open_every_state(r, catalog, opened);
    engine::AddRequest request{
        r.key, {}, {r.pod.namespace_, r.pod.name}, network_tag(r.network.name)};
    std::vector<Answered> answered;
    std::vector<size_t> holding;
    HeldClaimBound bound;
    for (size_t i = 0; i < opened.size(); ++i) {
        const std::string pool = object_name_of_state(opened[i].name);
        // A claim whose address another node may have been given meanwhile (a pool of fixed
        // addresses across nodes) is bound only with the cluster store's word, never offline.
        if (source.fixed_across_nodes(pool)) continue;
        for (const engine::ClaimView& v : opened[i].allocator().claims()) {
            if (!(v.fp == fp) || v.use == engine::ClaimView::Use::kExpiring) continue;
            engine::AddRequest req = request;
            req.claim = engine::ClaimSpec{key, v.keep_idle};
            auto added = opened[i].allocator().add(req);
            if (!added) {
                for (size_t at : holding) (void)opened[at].allocator().del(r.key);
                return added.error();
            }
            // Bound where the source no longer serves (a block taken from the node): let go,
            // as a repeated ADD lets such holdings go.
            if (!source.still_serves(pool, added->addresses)) {
                if (auto st = opened[i].allocator().del(r.key); !st) return st.error();
                break;
            }
            holding.push_back(i);
            for (const auto& a : added->addresses) answered.push_back({opened[i].name, a});
            bound.pools.push_back(pool);
            break;
        }
    }
    if (holding.empty()) return std::optional<HeldClaimBound>{};
    const pools::Selection sel = pools::select_pools(catalog, pod_facts(r), r.pools->config);
    bound.claim = who.display();
    bound.result = pool_result(r, catalog, answered, sel.clean_gateway, sel.annotation_routes);
    keep_states(upkeep, opened);
    return std::optional<HeldClaimBound>{std::move(bound)};
}

}  // namespace shmipam::ipam
