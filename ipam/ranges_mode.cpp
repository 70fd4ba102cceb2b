#include "ipam/ranges_mode.h"

#include <memory>

#include "engine/ops/allocator.h"
#include "engine/ops/open_network.h"
#include "engine/state/journal_compaction.h"
#include "engine/state/network_store.h"
#include "ipam/fixed_claim.h"
#include "ipam/prev_result.h"

namespace shmipam::ipam {

namespace {

// Runs `op` on the network's opened state, which is kept until the process exits; one whose
// append reached a segment's compaction check is compacted once the answer is out.
template <typename Op>
auto on_network(const Request& r, Upkeep& upkeep, Op op)
    -> decltype(op(std::declval<engine::Allocator&>())) {
    auto store = engine::open_network(r.network);
    if (!store) return store.error();
    std::shared_ptr<engine::NetworkStore> kept(std::move(*store));
    engine::Allocator alloc(*kept, r.network);
    auto out = op(alloc);
    if (kept->compaction_due()) {
        upkeep.after_answer = [kept] { engine::compact_journal_if_due(*kept); };
    }
    upkeep.keep_until_exit.push_back(std::move(kept));
    return out;
}

}  // namespace

Expected<AddResult> ranges_add(const Request& r, Upkeep& upkeep) {
    auto fixed = fixed_claim_of(r);
    if (!fixed) return fixed.error();
    return on_network(r, upkeep, [&](engine::Allocator& alloc) -> Expected<AddResult> {
        engine::AddRequest req{r.key, r.requested, {r.pod.namespace_, r.pod.name}};
        req.claim = std::move(*fixed);
        auto out = alloc.add(req);
        if (!out) return out.error();
        AddResult result;
        result.routes = r.routes;
        for (const auto& a : out->addresses) {
            result.ips.push_back({a.address, a.range->subnet.prefix, a.range->gateway});
        }
        return result;
    });
}

Status ranges_del(const Request& r, Upkeep& upkeep) {
    return on_network(r, upkeep, [&](engine::Allocator& alloc) { return alloc.del(r.key); });
}

Status ranges_check(const Request& r, Upkeep& upkeep) {
    return on_network(r, upkeep, [&](engine::Allocator& alloc) -> Status {
        auto held = alloc.addresses_of(r.key);
        if (!held) return held.error();
        std::vector<engine::IpAddress> addresses;
        for (const auto& a : *held) addresses.push_back(a.address);
        return check_against_prev_result(addresses, r.prev_result, [&](const engine::IpAddress& a) {
            for (const auto& set : r.network.range_sets) {
                if (engine::range_index_for(set, a)) return true;
            }
            return false;
        });
    });
}

Status ranges_gc(const Request& r, Upkeep& upkeep) {
    if (!r.valid_attachments) {
        return make_error(Code::kInvalidConfig,
                          "GC needs \"cni.dev/valid-attachments\" in the config");
    }
    return on_network(r, upkeep, [&](engine::Allocator& alloc) -> Status {
        auto out = alloc.gc(*r.valid_attachments);
        if (!out) return out.error();
        return Ok{};
    });
}

Status ranges_status(const Request& r, Upkeep& upkeep) {
    return on_network(r, upkeep, [&](engine::Allocator& alloc) { return alloc.status(); });
}

}  // namespace shmipam::ipam
