#include "cluster/cluster_gc.h"

#include "cluster/node_files.h"
#include "cluster/waiting.h"
#include "engine/ops/allocator.h"

namespace shmipam::cluster {

namespace {

// Why a block of a node missing from the list is kept, or "": a block claimed after the list was
// taken (its owner may have registered since: the list cannot speak for it), or within
// blockMinAgeS (a node's first blocks while the list is being made). claimedUnixS is the
// claiming node's clock: kClockSlackS covers the difference.
std::string kept_for_age(const Block& b, time_t list_taken_at, time_t now, uint64_t min_age_s) {
    const auto claimed = time_t(b.claimed_unix_s);
    if (claimed + kClockSlackS >= list_taken_at) return "claimed after the node list was taken";
    if (claimed + time_t(min_age_s) > now) return "claimed within blockMinAgeS";
    return "";
}

// Whether the claim key ("sts:<ns>/<pod>/<ifname>") is one of pod `ns/name`'s.
bool claim_names_pod(const std::string& key, const std::string& pod) {
    const size_t colon = key.find(':');
    const size_t last = key.rfind('/');
    return colon != std::string::npos && last != std::string::npos && last > colon &&
           key.substr(colon + 1, last - colon - 1) == pod;
}

// Why a fixed claim of a node gone is kept, or "" when its policy frees it now: never (the pod's
// next start anywhere keeps its address, until an operator releases it), while its StatefulSet
// wants it (gc reads no API), or idle for less than its time. A claim of a timed policy that no
// DEL marked idle counts from the first gc that found its node gone.
std::string kept_by_policy(const FixedClaim& c, uint64_t now) {
    if (c.keep_idle == format::kKeepIdleForever) {
        return "reclaim policy never: kept for the pod's next start on any node (release it "
               "with --claim NAMESPACE/POD)";
    }
    if (c.keep_idle == format::kKeepIdleWhileOwnerWants) {
        if (c.key.starts_with("vm:")) {
            return "kept while its VM exists, which gc cannot ask (release it with --claim "
                   "NAMESPACE/VM once the VirtualMachine is deleted)";
        }
        return "kept while its StatefulSet wants it, which gc cannot ask (release it with "
               "--claim NAMESPACE/POD once the set no longer covers the pod)";
    }
    if (c.keep_idle == format::kKeepIdleNone) return "";
    const uint64_t keep_s = c.keep_idle - 1;
    const uint64_t since = c.idle_since_unix_s != 0 ? c.idle_since_unix_s : now;
    if (now >= since + keep_s) return "";
    return "reclaim policy: kept " + std::to_string(keep_s) + " s idle, " +
           std::to_string(since + keep_s - now) + " s to go" +
           (c.idle_since_unix_s == 0 ? " (idle from this gc: its node was found gone)" : "");
}

}  // namespace

Expected<std::vector<GcRow>> collect_garbage(GuardedStore& store, const GcPlan& plan, time_t now) {
    if (plan.live_nodes.empty()) {
        return make_error(Code::kInvalidConfig,
                          "--live-nodes lists no node: that would release every block of the "
                          "cluster; refusing (give the cluster's Node list)");
    }
    // A list that names none of the nodes owning blocks is almost surely the wrong list.
    std::set<std::string> owners;
    for (const auto& [pool, blocks] : plan.blocks) {
        for (const auto& b : blocks) owners.insert(b.node);
    }
    for (const auto& [pool, c] : plan.claims) owners.insert(c.node);
    bool any_live = false;
    for (const auto& n : owners) any_live = any_live || plan.live_nodes.count(n) != 0;
    if (!owners.empty() && !any_live && !plan.force) {
        return make_error(Code::kInvalidConfig,
                          "none of the " + std::to_string(owners.size()) +
                              " nodes owning blocks is in --live-nodes: that would release every "
                              "block of the cluster; refusing (--force if that is meant)");
    }
    BlockStore blocks(store, store.prefix());
    Waiting waiting(store, store.prefix());
    FixedClaims fixed(store, store.prefix());
    std::vector<GcRow> rows;
    for (const auto& [pool, of_pool] : plan.blocks) {
        for (const auto& b : of_pool) {
            if (plan.live_nodes.count(b.node) != 0) continue;
            GcRow r{pool, b.cidr.to_string(), b.node, false,
                    kept_for_age(b, plan.list_taken_at, now, plan.block_min_age_s)};
            if (plan.apply && r.kept.empty()) {
                // At the revision read: a block claimed again meanwhile is left alone.
                auto done = blocks.release(pool, b);
                if (!done) return done.error();
                r.released = *done;
                if (*done) (void)waiting.clear_idle(pool, b.cidr);
            }
            rows.push_back(std::move(r));
        }
    }
    for (const auto& [pool, c] : plan.claims) {
        if (plan.live_nodes.count(c.node) != 0) continue;
        const bool named = !plan.named_pod.empty() && claim_names_pod(c.key, plan.named_pod);
        GcRow r{pool, "claim " + c.key + " (" + c.address.to_string() + ")", c.node, false,
                named ? "" : kept_by_policy(c, uint64_t(now))};
        if (plan.apply && r.kept.empty()) {
            auto done = fixed.remove(pool, c);
            if (!done) return done.error();
            r.released = *done;
        } else if (plan.apply && c.idle_since_unix_s == 0 && !named) {
            // Idle from now, as far as the store can tell: a timed policy counts from here.
            auto marked = fixed.mark_idle(pool, c, uint64_t(now));
            if (!marked) return marked.error();
        }
        rows.push_back(std::move(r));
    }
    return rows;
}

}  // namespace shmipam::cluster
