#include "plugin/pool_commands.h"

#include <memory>
#include <set>

#include "engine/ops/allocator.h"
#include "engine/ops/open_network.h"
#include "engine/state/journal_compaction.h"
#include "plugin/cluster_blocks.h"
#include "plugin/cni_result.h"
#include "plugin/fixed_ip.h"
#include "plugin/pool_catalog_cache.h"
#include "plugin/pool_state.h"
#include "pools/selection.h"

namespace shmipam::cni {

using engine::Family;
using engine::IpAddress;
using nlohmann::json;

namespace {

// One opened pool state: its config must outlive the store and the allocator that read it.
struct OpenState {
    std::string name;
    std::unique_ptr<engine::NetworkConfig> cfg;
    std::unique_ptr<engine::NetworkStore> store;
};

Expected<OpenState> open_state(std::string name, std::unique_ptr<engine::NetworkConfig> cfg) {
    auto store = engine::open_network(*cfg);
    if (!store) return store.error();
    return OpenState{std::move(name), std::move(cfg), std::move(*store)};
}

// Opens every pool state of this node (read or released whatever the pools directory says now)
// into `opened`; one that cannot be opened is skipped and the first such error returned.
std::optional<Error> open_every_state(const NetConf& nc, const pools::Catalog& catalog,
                                      std::vector<OpenState>& opened,
                                      const std::vector<std::string>& likely = {}) {
    std::optional<Error> first_error;
    for (const std::string& name : pool_states(nc, likely)) {
        auto st = open_state(name, reading_config(nc, name, catalog));
        if (st) {
            opened.push_back(std::move(*st));
        } else if (!first_error) {
            first_error = st.error();
        }
    }
    return first_error;
}

// What the attachment holds in one state.
struct Held {
    std::string state;
    std::vector<engine::AllocatedAddress> addresses;
};

// Everything the attachment holds, in every pool state of this node (a repeated ADD, CHECK).
// `opened` keeps the stores (and the configs the addresses point into) alive.
Expected<std::vector<Held>> find_held(const NetConf& nc, const pools::Catalog& catalog,
                                      const engine::AttachmentKey& key,
                                      std::vector<OpenState>& opened,
                                      const std::vector<std::string>& likely = {}) {
    if (auto e = open_every_state(nc, catalog, opened, likely)) return *e;
    std::vector<Held> out;
    for (OpenState& s : opened) {
        engine::Allocator alloc(*s.store, *s.cfg);
        auto held = alloc.addresses_of(key);
        if (held) {
            out.push_back({s.name, std::move(*held)});
        } else if (held.error().code != Code::kCheckNoAllocation) {
            return held.error();
        }
    }
    return out;
}

struct Answered {
    std::string state;
    engine::AllocatedAddress address;
};

json route_json(const std::string& dst, const std::string& gw) {
    json r{{"dst", dst}};
    if (!gw.empty()) r["gw"] = gw;
    return r;
}

// The result: each address with its pool's prefix and gateway; routes: the config's, each
// pool's, a default route through each gateway unless clean_gateway, the pod's annotation's.
json pool_result(const std::string& version, const NetConf& nc, const pools::Catalog& catalog,
                 const std::vector<Answered>& addrs, bool clean_gateway,
                 const std::vector<pools::Route>& annotation_routes, const json& dns) {
    json ips = json::array();
    json routes = nc.routes.is_array() ? nc.routes : json::array();
    auto add_route = [&](json r) {
        for (const auto& have : routes) {
            if (have == r) return;
        }
        routes.push_back(std::move(r));
    };
    for (const auto& a : addrs) {
        const pools::AddressSpec* object = object_of(a.state, catalog);
        const auto gateway = object != nullptr ? object->gateway : std::nullopt;
        ips.push_back(ip_json(version, a.address.address, a.address.range->subnet.prefix, gateway));
        if (object != nullptr) {
            for (const auto& r : object->routes) add_route(route_json(r.dst, r.gw));
        }
        if (gateway && !clean_gateway) {
            add_route(route_json(gateway->family == Family::kV4 ? "0.0.0.0/0" : "::/0",
                                 gateway->to_string()));
        }
    }
    for (const auto& r : annotation_routes) add_route(route_json(r.dst, r.gw));
    return result_json(version, std::move(ips), routes, dns);
}

// The opened states go with the answer, kept until the process exits (Invocation::
// keep_until_exit); one whose append reached a compaction check is compacted after the answer.
void keep_states(Invocation& inv, std::vector<OpenState>& opened) {
    auto kept = std::make_shared<std::vector<OpenState>>(std::move(opened));
    bool due = false;
    for (const OpenState& s : *kept) due = due || (s.store && s.store->compaction_due());
    if (due) {
        inv.after_answer = [kept] {
            for (const OpenState& s : *kept) {
                if (s.store && s.store->compaction_due()) engine::compact_journal_if_due(*s.store);
            }
        };
    }
    inv.keep_until_exit.push_back(std::move(kept));
}

// Releases the name's claim (found by its key's fingerprint) in one state; one in use only with
// in_use_too.
Expected<size_t> release_claim(OpenState& s, const engine::ClaimSpec& claim,
                               const std::string& ifname, bool in_use_too) {
    return engine::Allocator(*s.store, *s.cfg).release_claim(claim.key, ifname, in_use_too);
}

// The name's claim in this state, when its address was excluded or reserved since it was
// claimed (the pool's allocatable set no longer holds it): the pod kept it while it ran; now that
// it starts again the claim is released, and the ADD claims an allocatable address.
Status drop_unusable_claim(OpenState& s, const engine::ClaimSpec& claim, const std::string& ifname,
                           const pools::IpSet& usable) {
    auto held = engine::Allocator(*s.store, *s.cfg).addresses_of({claim.key, ifname});
    bool unusable = !held && held.error().code == Code::kInvalidConfig;  // outside the ranges
    for (const auto& a : held ? *held : std::vector<engine::AllocatedAddress>{}) {
        unusable = unusable || !usable.contains(a.address);
    }
    if (!unusable) return Ok{};
    // One in use (by an older sandbox the runtime has not deleted yet) is kept while it runs.
    auto released = release_claim(s, claim, ifname, /*in_use_too=*/false);
    if (!released) return released.error();
    return Ok{};
}

// One ADD's claims across the families of a selection: the stores it opened, what it holds, how
// to undo it.
struct FamilyClaim {
    const NetConf& nc;
    const pools::Catalog& catalog;
    std::vector<OpenState>& opened;
    engine::AddRequest request;  // its key's ifname is the NIC in messages
    std::string rule;            // the rule that gave the candidates, for messages
    std::vector<Answered> answered;
    std::vector<size_t> holding;     // indexes into `opened` where the attachment was claimed
    std::vector<size_t> new_claims;  // of `holding`: where a fixed address was claimed anew

    // The store of `state` (the one find_held opened, if it did: a store does not keep the
    // config it was opened with, so that one's config is told the ranges it may now use).
    Expected<size_t> store_for(const std::string& state, const pools::AddressSpec& object,
                               const pools::IpSet& usable) {
        for (size_t i = 0; i < opened.size(); ++i) {
            if (opened[i].name != state) continue;
            allocate_from(*opened[i].cfg, object.subnet, object.gateway, usable);
            return i;
        }
        auto st =
            open_state(state, allocating_config(nc, state, object.subnet, object.gateway, usable));
        if (!st) return st.error();
        opened.push_back(std::move(*st));
        return opened.size() - 1;
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
            const std::string state = state_name(c);
            // Cluster mode: only this node's blocks of the pool, and another block claimed (by
            // the cluster helper) when they have no room (docs/cluster.md).
            if (nc.pool_mode->cluster && nc.pool_mode->cluster->fixed_pools.count(c.name) != 0) {
                if (!request.claim) {
                    reasons.push_back("IPPool " + c.name +
                                      " holds fixed addresses only (StatefulSet pods, "
                                      "statefulSetFixedIP)");
                    continue;
                }
                auto served = serve_fixed(c, object, state, usable, wanted, reasons);
                if (!served) return served.error();
                if (*served) return std::nullopt;
                continue;
            }
            if (nc.pool_mode->cluster) reconcile_after_boot(nc, c.name, object.subnet, usable);
            for (int round = 0;; ++round) {
                // Cluster mode: the node's blocks, those marked to be given back tried last (a
                // sticky pod's claim, which a narrower set would drop, sees them all at once).
                std::vector<pools::IpSet> tries{usable};
                pools::IpSet mine_all = usable;
                if (nc.pool_mode->cluster) {
                    auto mine = in_own_blocks(nc, c.name, usable);
                    if (!mine) return mine.error();
                    mine_all = mine->all();
                    tries = request.claim ? std::vector<pools::IpSet>{mine_all}
                                          : std::vector<pools::IpSet>{mine->kept, mine->marked};
                }
                auto out = make_error(Code::kNoAddressFree, "");
                bool given_back = false;
                for (const pools::IpSet& here : tries) {
                    if (here.empty() || (wanted && !here.contains(*wanted))) continue;
                    auto at = store_for(state, object, here);
                    if (!at) return at.error();
                    OpenState& s = opened[*at];
                    engine::AddRequest req = request;
                    if (wanted) req.requested = {*wanted};
                    if (req.claim) {
                        if (auto st = drop_unusable_claim(s, *req.claim, req.key.ifname, here);
                            !st) {
                            return st.error();
                        }
                    }
                    auto added = engine::Allocator(*s.store, *s.cfg).add(req);
                    // Cluster mode: a block given back while this ADD chose among the node's
                    // blocks is out of the cache before its slots are let go; an address taken
                    // in it is given back, and the ADD looks again.
                    if (added && nc.pool_mode->cluster && !added->existing &&
                        !still_own(nc, c.name, added->addresses)) {
                        // (Left held, a retried ADD would answer it: the runtime retries.)
                        if (auto st = engine::Allocator(*s.store, *s.cfg).del(req.key); !st) {
                            return st.error();
                        }
                        if (req.claim) (void)release_claim(s, *req.claim, req.key.ifname, true);
                        if (round >= 8) {
                            return make_error(Code::kTryAgainLater,
                                              "this node's blocks of " + c.name +
                                                  " kept being given back during the ADD");
                        }
                        given_back = true;
                        break;
                    }
                    if (added) {
                        if (nc.pool_mode->cluster && !added->existing) {
                            claim_ahead(nc, c.name, object.subnet, usable, mine_all, *s.store);
                        }
                        if (req.claim && !added->existing) new_claims.push_back(*at);
                        holding.push_back(*at);
                        for (const auto& a : added->addresses) answered.push_back({state, a});
                        return std::nullopt;
                    }
                    out = added.error();
                    if (out.code != Code::kNoAddressFree) return out;
                }
                if (given_back) continue;
                if (out.code != Code::kNoAddressFree) return out;
                // Cluster mode tries a few times: concurrent ADDs on the node may fill the block
                // just claimed (by its helper, or by another ADD's) before this one gets there.
                if (!nc.pool_mode->cluster || round >= 8) {
                    reasons.push_back("all IP addresses used out of " + c.name +
                                      (nc.pool_mode->cluster ? " in this node's blocks" : ""));
                    break;
                }
                std::string why;
                auto got = claim_block(nc, c.name, object.subnet, usable, wanted, &why);
                if (!got) return got.error();
                if (!*got) {
                    reasons.push_back(why);
                    break;
                }
            }
        }
        std::string why;
        for (const auto& r : reasons) why += (why.empty() ? "" : ", ") + r;
        for (const auto& f : fam.filtered) why += (why.empty() ? "" : ", ") + f.reason;
        return Error{wanted ? Code::kRequestedAddressInvalid : Code::kNoAddressFree,
                     "failed to allocate any " + pools::family_name(fam.family) +
                         " IP address to NIC " + request.key.ifname + " from IPPools " +
                         pools::go_list(tried) + ": [" + why + "]",
                     "rule: " + rule};
    }

    // Cluster mode's fixed-address pools (docs/cluster.md): the claim's address from etcd
    // (taken over from another node if the pod moved), then held here by the local claim. True
    // when served; false with a reason when the pool cannot serve.
    Expected<bool> serve_fixed(const pools::Candidate& c, const pools::AddressSpec& object,
                               const std::string& state, const pools::IpSet& usable,
                               const std::optional<IpAddress>& wanted,
                               std::vector<std::string>& reasons) {
        // The node's pool lock, held from the take until the local claim is made: a DEL of the
        // pod's old sandbox gives the etcd claim up under it, after looking for a local claim
        // (its helper reads the pool state after the etcd claim). So it either finds this
        // ADD's local claim and keeps the etcd claim, or gives it up before this take, which
        // then takes it anew; never between a take that found the claim this node's (no
        // write) and the local claim, which would leave an address etcd gives no claim.
        auto held = PoolHelperLock::acquire(nc, c.name);
        if (!held) return held.error();
        auto fixed =
            take_fixed_address(nc, c.name, object.subnet, usable, request.claim->key, **held);
        if (!fixed) {
            if (fixed.error().code != Code::kNoAddressFree) return fixed.error();
            reasons.push_back(fixed.error().msg);
            return false;
        }
        if (wanted && !(*wanted == *fixed)) {
            reasons.push_back("the pod's fixed address in " + c.name + " is " + fixed->to_string() +
                              ", not the requested " + wanted->to_string());
            return false;
        }
        pools::IpSet here(usable.family());
        here.add(fixed->value, fixed->value);
        auto at = store_for(state, object, here);
        if (!at) return at.error();
        OpenState& s = opened[*at];
        engine::AddRequest req = request;
        req.requested = {*fixed};
        if (auto st = drop_unusable_claim(s, *req.claim, req.key.ifname, here); !st) {
            return st.error();
        }
        engine::Allocator alloc(*s.store, *s.cfg);
        auto added = alloc.add(req);
        if (!added && (added.error().code == Code::kRequestedAddressTaken ||
                       added.error().code == Code::kNoAddressFree)) {
            // Held here by the idle claim of a pod that has since moved to another node and
            // given the address up there: etcd gave it to this claim, so that one lets go.
            (void)alloc.release_claims(
                [&](const engine::ClaimView& v) {
                    for (const auto& a : v.addresses) {
                        if (a == *fixed) return true;
                    }
                    return false;
                },
                /*in_use_too=*/false, /*dry_run=*/false);
            added = alloc.add(req);
        }
        if (!added) return added.error();
        if (!added->existing) new_claims.push_back(*at);
        holding.push_back(*at);
        for (const auto& a : added->addresses) answered.push_back({state, a});
        return true;
    }

    void undo() {
        for (size_t i : holding)
            engine::Allocator(*opened[i].store, *opened[i].cfg).del(request.key);
        // A claim this ADD made for nothing is not kept for the name.
        for (size_t i : new_claims) {
            (void)release_claim(opened[i], *request.claim, request.key.ifname, true);
        }
    }
};

Invocation pool_add(const CniEnv& env, const NetConf& nc, const std::string& v,
                    const std::vector<IpAddress>& requested, const CniArgs& args, const json& dns,
                    const pools::Catalog& catalog) {
    const engine::AttachmentKey key{env.container_id, env.ifname};
    std::vector<OpenState> opened;
    const pools::PodFacts facts = pod_facts(env, nc, args);
    auto fixed = fixed_ip_claim(env, nc, args);
    if (!fixed) return fail(v, fixed.error());
    const pools::Selection sel = pools::select_pools(catalog, facts, nc.pool_mode->config);

    // A repeated ADD answers what the attachment holds, wherever it is (even in a pool since
    // edited out of the rules).
    std::vector<std::string> candidates;
    for (const pools::FamilyPlan& fam : sel.families) {
        for (const pools::Candidate& c : fam.order) candidates.push_back(state_name(c));
    }
    auto held = find_held(nc, catalog, key, opened, candidates);
    if (!held) return fail(v, held.error());
    // Cluster mode: what the attachment holds in a block the node no longer owns (an ADD that
    // could not give such an address back, retried) is let go, and the ADD starts afresh.
    if (nc.pool_mode->cluster && !held->empty()) {
        bool stale = false;
        for (const Held& h : *held) {
            // (A fixed-address pool is never cut into blocks: its claims are in etcd, and a
            // repeated ADD answers what the pod holds. Counted stale, it was freed outside the
            // pool lock each time: docs/cluster.md, "Fixed addresses across nodes".)
            const std::string pool = object_name_of_state(h.state);
            if (nc.pool_mode->cluster->fixed_pools.count(pool) != 0) continue;
            stale = stale || !still_own(nc, pool, h.addresses);
        }
        if (stale) {
            for (OpenState& s : opened) {
                if (auto st = engine::Allocator(*s.store, *s.cfg).del(key); !st) {
                    return fail(v, st.error());
                }
            }
            held->clear();
        }
    }
    if (!held->empty()) {
        std::vector<Answered> addrs;
        for (const Held& h : *held) {
            for (const auto& a : h.addresses) addrs.push_back({h.state, a});
        }
        Invocation inv = succeed(
            pool_result(v, nc, catalog, addrs, sel.clean_gateway, sel.annotation_routes, dns));
        keep_states(inv, opened);
        return inv;
    }
    if (sel.error) {
        Error e = *sel.error;
        if (e.details.empty()) e.details = "rule: " + pools::describe(sel.rule);
        return fail(v, e);
    }

    // Each family in turn; a family that cannot be served undoes the ones before it.
    FamilyClaim claim{
        nc, catalog, opened,
        engine::AddRequest{
            key, {}, {args.pod_namespace, args.pod_name}, network_tag(nc.network.name)},
        pools::describe(sel.rule)};
    claim.request.claim = *fixed;
    for (const pools::FamilyPlan& fam : sel.families) {
        std::optional<IpAddress> wanted;
        for (const IpAddress& a : requested) {
            if (a.family == fam.family) wanted = a;
        }
        if (auto e = claim.serve(fam, wanted)) {
            claim.undo();
            return fail(v, *e);
        }
    }
    // A claim the name has in another pool state is released: the pod's pool changed
    // (Spiderpool since v0.9.4). Every state of the node is open already (the repeated-ADD
    // check opened them), and each lookup is one probe of its index, so this runs at every
    // sticky ADD: one that died before it, or failed in it, is made good by the retry.
    if (fixed->has_value()) {
        std::set<std::string> serving;
        for (size_t i : claim.holding) serving.insert(opened[i].name);
        for (OpenState& s : opened) {
            if (serving.count(s.name) != 0 || !s.store) continue;
            if (auto released = release_claim(s, **fixed, env.ifname, true); !released) {
                claim.undo();
                return fail(v, released.error());
            }
        }
    }
    Invocation inv = succeed(
        pool_result(v, nc, catalog, claim.answered, sel.clean_gateway, sel.annotation_routes, dns));
    keep_states(inv, opened);
    return inv;
}

// DEL, GC: every pool state of the node, whatever the pools directory says now.
// Cluster mode, a fixed-address pool: a DEL that freed the pod's claim here (policy 0) gives
// it up in etcd too, if it is still this node's (a late DEL after the pod moved frees nothing)
// and the helper, once it has read the claim, finds no local claim made again meanwhile.
Status after_fixed_del(const CniEnv& env, const NetConf& nc, const CniArgs& args,
                       const std::string& pool, engine::Allocator& alloc,
                       const std::string& alloc_dir) {
    auto fixed = fixed_ip_claim(env, nc, args);
    if (!fixed || !*fixed) return Ok{};
    for (const auto& c : alloc.claims()) {
        if (c.fp == engine::fingerprint((*fixed)->key, env.ifname)) return Ok{};  // kept here
    }
    return give_up_fixed_address(nc, pool, (*fixed)->key, alloc_dir, env.ifname);
}

Invocation pool_release(const CniEnv& env, const NetConf& nc, const std::string& v,
                        const pools::Catalog& catalog, const CniArgs& args) {
    const engine::AttachmentKey key{env.container_id, env.ifname};
    std::vector<OpenState> opened;
    std::optional<Error> first_error = open_every_state(nc, catalog, opened);
    for (OpenState& s : opened) {
        engine::Allocator alloc(*s.store, *s.cfg);
        Status done = Ok{};
        if (env.command == Command::kDel) {
            // Cluster mode: what the DEL lets go of, to see whether its block is left empty.
            std::vector<IpAddress> released;
            if (nc.pool_mode->cluster) {
                auto held = alloc.addresses_of(key);
                for (const auto& a : held ? *held : std::vector<engine::AllocatedAddress>{}) {
                    released.push_back(a.address);
                }
            }
            done = alloc.del(key);
            if (done && nc.pool_mode->cluster) {
                const std::string pool = object_name_of_state(s.name);
                if (nc.pool_mode->cluster->fixed_pools.count(pool) != 0) {
                    done = after_fixed_del(env, nc, args, pool, alloc, s.store->dir());
                } else {
                    after_del(nc, pool, released, *s.store);
                }
            }
        } else {
            auto gc = alloc.gc(*nc.valid_attachments, network_tag(nc.network.name));
            if (!gc) done = gc.error();
        }
        if (!done && !first_error) first_error = done.error();
    }
    // Every state was tried: one that failed is retried by the runtime, the others are done.
    if (first_error) return fail(v, *first_error);
    Invocation inv;
    keep_states(inv, opened);
    return inv;
}

Invocation pool_check(const CniEnv& env, const NetConf& nc, const std::string& v,
                      const pools::Catalog& catalog) {
    const engine::AttachmentKey key{env.container_id, env.ifname};
    std::vector<OpenState> opened;
    auto held = find_held(nc, catalog, key, opened);
    if (!held) return fail(v, held.error());
    std::set<std::pair<int, engine::u128>> ours, theirs;
    std::string have;
    for (const Held& h : *held) {
        for (const auto& a : h.addresses) {
            ours.insert({int(a.address.family), a.address.value});
            have += (have.empty() ? "" : ",") + a.address.to_string();
        }
    }
    if (ours.empty()) {
        return fail(v, make_error(Code::kCheckNoAllocation,
                                  "no address is allocated to container " + key.container_id +
                                      " interface " + key.ifname + " in any pool"));
    }
    if (nc.prev_result.is_object() && nc.prev_result.contains("ips") &&
        nc.prev_result["ips"].is_array()) {
        for (const auto& ip : nc.prev_result["ips"]) {
            if (!ip.is_object() || !ip.contains("address") || !ip["address"].is_string()) {
                return fail(v,
                            make_error(Code::kDecode, "prevResult.ips[].address must be a string"));
            }
            auto c = engine::Cidr::parse(ip["address"].get<std::string>());
            if (!c) {
                return fail(v, make_error(Code::kDecode,
                                          "invalid prevResult address " + ip["address"].dump()));
            }
            // Addresses of our pools and subnets are ours to check; others are another plugin's.
            bool in_pools = ours.count({int(c->address.family), c->address.value}) != 0;
            for (const auto& p : catalog.pools())
                in_pools = in_pools || p.subnet.contains(c->address);
            for (const auto& s : catalog.subnets())
                in_pools = in_pools || s.subnet.contains(c->address);
            if (in_pools) theirs.insert({int(c->address.family), c->address.value});
        }
        if (ours != theirs) {
            return fail(
                v, make_error(Code::kCheckMismatch,
                              "the addresses allocated to the container differ from prevResult",
                              "allocated: " + have));
        }
    }
    return Invocation{};
}

// The command over the pools catalog.
Invocation pool_command(const CniEnv& env, const NetConf& nc, const std::string& v,
                        const std::vector<IpAddress>& requested, const CniArgs& args,
                        const json& dns, const pools::Catalog& catalog) {
    switch (env.command) {
        case Command::kAdd:
            return pool_add(env, nc, v, requested, args, dns, catalog);
        case Command::kDel:
            return pool_release(env, nc, v, catalog, args);
        case Command::kGc:
            if (!nc.valid_attachments) {
                return fail(v, make_error(Code::kInvalidConfig,
                                          "GC needs \"cni.dev/valid-attachments\" in the config"));
            }
            return pool_release(env, nc, v, catalog, args);
        case Command::kCheck:
            return pool_check(env, nc, v, catalog);
        case Command::kStatus:
            if (catalog.pool_summaries().empty() && catalog.subnets().empty()) {
                return fail(v, make_error(Code::kUnavailable,
                                          "poolsDir " + nc.pool_mode->pools_dir +
                                              " holds no usable SpiderIPPool or SpiderSubnet"));
            }
            return Invocation{};
        case Command::kVersion:
            break;
    }
    return Invocation{};
}

}  // namespace

Invocation run_pool_command(const CniEnv& env, const NetConf& nc, const std::string& v,
                            const std::vector<IpAddress>& requested, const CniArgs& args,
                            const json& dns) {
    auto catalog = load_catalog(nc);
    if (!catalog) return fail(v, catalog.error());
    Invocation inv = pool_command(env, nc, v, requested, args, dns, **catalog);
    inv.keep_until_exit.push_back(std::move(*catalog));
    return inv;
}

}  // namespace shmipam::cni
