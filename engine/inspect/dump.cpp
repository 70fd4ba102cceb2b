// dump: every address that is not free, to whom and since when, with per-block and per-range
// utilisation and the network's counters. Read-only.
#include <map>
#include <set>

#include "base/clock.h"
#include "engine/inspect/inspect.h"
#include "engine/slots/attachment_index.h"
#include "engine/slots/block_map.h"
#include "engine/slots/entry_fields.h"
#include "engine/slots/slot_ops.h"
#include "engine/state/journal_records.h"
#include "shm/atomic_word.h"
#include "shm/codec.h"
#include "shm/journal.h"

namespace shmipam::engine {

using format::EntryState;
using format::SlotState;
using shm::EntryWord;
using shm::SlotWord;

const char* slot_state_name(SlotState s) {
    switch (s) {
        case SlotState::kFree:
            return "free";
        case SlotState::kClaiming:
            return "claiming";
        case SlotState::kAllocated:
            return "allocated";
        case SlotState::kReleasing:
            return "releasing";
        case SlotState::kCooling:
            return "cooling";
        case SlotState::kReserved:
            return "reserved";
        case SlotState::kSticky:
            return "sticky";
    }
    return "invalid";
}

namespace {

// The container ID of the live sandbox a claim entry is bound to (docs/fixed-ips.md), or "".
std::string claim_user(shm::IndexFile& idx, const format::Entry& claim) {
    const shm::ClaimBinding b = shm::ClaimBinding::decode(shm::load_word(claim.claim.binding));
    if (b.kind != shm::ClaimBinding::Kind::kBound || b.entry >= idx.entry_count()) return "";
    const format::Entry& s = idx.entry(b.entry);
    const shm::EntryWord w = shm::EntryWord::decode(shm::load_word(s.state));
    if (w.state != format::EntryState::kCommitted || w.gen != b.tenancy) return "";
    return fixed(s.container_id, sizeof s.container_id);
}

// Parses the display text the plugin records ("CIDR [start-end], ... ; CIDR [start-end]").
std::vector<RangeView> parse_ranges(const std::string& text) {
    std::vector<RangeView> out;
    size_t set = 0, pos = 0;
    while (pos < text.size()) {
        const size_t semi = text.find(" ; ", pos);
        const std::string part =
            text.substr(pos, semi == std::string::npos ? std::string::npos : semi - pos);
        size_t p = 0;
        while (p < part.size()) {
            const size_t comma = part.find(", ", p);
            const std::string r =
                part.substr(p, comma == std::string::npos ? std::string::npos : comma - p);
            const size_t lb = r.find(" ["), dash = r.find('-', lb), rb = r.find(']', lb);
            if (lb != std::string::npos && dash != std::string::npos && rb != std::string::npos) {
                auto s = IpAddress::parse(r.substr(lb + 2, dash - lb - 2));
                auto e = IpAddress::parse(r.substr(dash + 1, rb - dash - 1));
                if (s && e && s->family == e->family && s->value <= e->value) {
                    RangeView v;
                    v.range_set = set;
                    v.subnet = r.substr(0, lb);
                    v.start = *s;
                    v.end = *e;
                    const u128 n = e->value - s->value + 1;
                    v.size = n > u128{~uint64_t{0}} ? ~uint64_t{0} : uint64_t(n);
                    out.push_back(v);
                }
            }
            if (comma == std::string::npos) break;
            p = comma + 2;
        }
        if (semi == std::string::npos) break;
        pos = semi + 3;
        ++set;
    }
    return out;
}

}  // namespace

Expected<NetworkDump> dump(NetworkStore& store) {
    NetworkDump d;
    auto& h = store.index().header();
    d.network = shm::read_fixed(h.network, sizeof h.network);
    d.data_dir = shm::read_fixed(h.data_dir, sizeof h.data_dir);
    d.ranges = store.ranges_text();
    d.range_views = parse_ranges(d.ranges);
    d.reuse_delay_ms = store.reuse_delay_ms();
    d.adds = shm::load_word(h.adds);
    d.dels = shm::load_word(h.dels);
    d.dead_leases_reaped = shm::load_word(h.dead_leases_reaped);
    d.busy_rejections = shm::load_word(h.busy_rejections);
    d.reboot_reclaims = shm::load_word(h.reboot_reclaims);
    d.rebuild_skipped_records = shm::load_word(h.rebuild_skipped_records);
    auto blocks = store.all_blocks();
    if (!blocks) return blocks.error();
    for (shm::BlockFile* b : *blocks) {
        const IpAddress base = block_base_of(*b);
        BlockView bv;
        bv.cidr = base.to_string() + "/" + std::to_string(b->header().prefix);
        bv.slots = b->slot_count();
        bv.claims = shm::load_word(b->header().claims);
        bv.releases = shm::load_word(b->header().releases);
        bv.cas_retries = shm::load_word(b->header().cas_retries);
        bv.rollbacks = shm::load_word(b->header().rollbacks);
        for (uint64_t i = 0; i < b->slot_count(); ++i) {
            const uint64_t w = slot_ops::load_state(*b, i);
            const SlotWord sw = SlotWord::decode(w);
            if (sw.state == SlotState::kFree) continue;
            if (sw.state == SlotState::kCooling)
                ++bv.cooling;
            else
                ++bv.in_use;
            SlotView v;
            v.address = IpAddress{base.value + i, base.family};
            v.block = bv.cidr;
            v.state = slot_state_name(sw.state);
            v.generation = sw.gen;
            const format::Slot& s = b->slot(i);
            if (sw.state == SlotState::kClaiming || sw.state == SlotState::kReleasing) {
                v.holder_pid = shm::LeaseTable::pid_of(store.index().leases().word(sw.lease_index));
            }
            v.allocated_unix_ns = shm::load_word(s.allocated_unix_ns);
            v.released_boot_ns = shm::load_word(s.changed_boot_ns);
            const uint64_t owner = sw.state == SlotState::kAllocated
                                       ? uint64_t(sw.owner_entry()) + 1
                                       : shm::SlotOwner::entry_plus_one(shm::load_word(s.owner));
            if (sw.state != SlotState::kCooling && owner != 0 &&
                owner <= store.index().entry_count()) {
                const format::Entry& e = store.index().entry(owner - 1);
                v.container_id = fixed(e.container_id, sizeof e.container_id);
                v.ifname = fixed(e.ifname, sizeof e.ifname);
                v.pod = pod_of(e);
                v.imported = (e.flags & format::kEntryFlagImported) != 0;
                v.claim = (e.flags & format::kEntryFlagClaim) != 0;
                if (v.claim) v.used_by = claim_user(store.index(), e);
            }
            d.slots.push_back(v);
        }
        d.blocks.push_back(bv);
    }
    for (const auto& s : d.slots) {
        for (auto& r : d.range_views) {
            if (s.address.family != r.start.family || s.address.value < r.start.value ||
                s.address.value > r.end.value) {
                continue;
            }
            if (s.state == "cooling") {
                ++r.cooling;
            } else {
                ++r.in_use;
            }
        }
    }
    auto& leases = store.index().leases();
    for (uint32_t i = 0; i < leases.size(); ++i) {
        const uint64_t w = leases.word(i);
        if (shm::LeaseTable::pid_of(w) == 0) continue;
        d.leases.push_back({i, shm::LeaseTable::pid_of(w),
                            leases.judge(i, w, store.self()) == shm::Holder::kAlive});
    }
    return d;
}

}  // namespace shmipam::engine
