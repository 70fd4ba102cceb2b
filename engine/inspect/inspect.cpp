#include "engine/inspect/inspect.h"

#include <map>
#include <set>

#include "engine/slots/attachment_index.h"
#include "engine/slots/entry_fields.h"
#include "engine/state/journal_records.h"
#include "engine/slots/slot_ops.h"
#include "shm/atomic_word.h"
#include "base/clock.h"
#include "shm/journal.h"
#include "shm/state_words.h"

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

IpAddress block_base(const shm::BlockFile& b) {
    const auto g = b.geometry();
    return IpAddress::from_bytes(Family(g.family), g.base);
}

// Whether the lease (index, low 16 bits of gen) is held by a live process right now.
bool lease_live(NetworkStore& store, uint16_t index, uint16_t gen) {
    auto& leases = store.index().leases();
    if (index >= leases.size()) return false;
    const uint64_t w = leases.word(index);
    if (shm::LeaseTable::pid_of(w) == 0 || shm::LeaseTable::gen_of(w) != gen) return false;
    return leases.judge(index, w, store.self()) == shm::Holder::kAlive;
}

using Newest = std::map<std::pair<int, u128>, const format::JournalRecord*>;

Newest newest_records(const std::vector<format::JournalRecord>& records) {
    Newest out;
    for (const auto& r : records) {
        const IpAddress a = record_address(r);
        const format::JournalRecord*& cur = out[{int(a.family), a.value}];
        if (cur == nullptr || r.slot_gen > cur->slot_gen ||
            (r.slot_gen == cur->slot_gen && r.sequence > cur->sequence)) {
            cur = &r;
        }
    }
    return out;
}

bool journaled(const Newest& newest, const IpAddress& a, uint64_t owner_fp1) {
    auto it = newest.find({int(a.family), a.value});
    return it != newest.end() && it->second->op == uint8_t(format::JournalOp::kAlloc) &&
           it->second->fp1 == owner_fp1;
}

}  // namespace

Expected<size_t> rejournal_allocations(NetworkStore& store) {
    auto scan = shm::Journal::scan(store.journal().dir());
    if (!scan) return scan.error();
    const auto newest = newest_records(scan->records);
    auto blocks = store.all_blocks();
    if (!blocks) return blocks.error();
    std::vector<format::JournalRecord> missing;
    for (shm::BlockFile* b : *blocks) {
        const IpAddress base = block_base(*b);
        for (uint64_t i = 0; i < b->slot_count(); ++i) {
            const SlotWord sw = SlotWord::decode(slot_ops::load_state(*b, i));
            if (sw.state != SlotState::kAllocated) continue;
            const IpAddress a{base.value + i, base.family};
            const format::Slot& s = b->slot(i);
            if (journaled(newest, a, shm::load_word(s.owner_fp))) continue;
            if (sw.owner_entry() >= store.index().entry_count()) continue;
            const format::Entry& e = store.index().entry(sw.owner_entry());
            const uint64_t ew = shm::load_word(e.state);
            auto fp = AttachmentIndex::read_fp(e, ew);
            if (!fp) continue;
            const AttachmentText text{fixed(e.container_id, sizeof e.container_id),
                                      fixed(e.ifname, sizeof e.ifname), fixed(e.pod, sizeof e.pod),
                                      e.flags, shm::load_word(s.allocated_unix_ns)};
            const size_t range_set = size_t((shm::load_word(s.owner) >> 32) & 0xFF);
            missing.push_back(make_record(format::JournalOp::kAlloc, a, b->header().prefix,
                                          range_set, sw.gen, *fp, text, store.boot_id(),
                                          base::unix_ns()));
        }
    }
    if (auto st = store.append_journal(missing); !st) {
        return st.error();
    }
    return missing.size();
}

namespace {

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
    auto blocks = store.all_blocks();
    if (!blocks) return blocks.error();
    for (shm::BlockFile* b : *blocks) {
        const IpAddress base = block_base(*b);
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
                                       : slot_ops::owner_entry_plus_one(shm::load_word(s.owner));
            if (sw.state != SlotState::kCooling && owner != 0 &&
                owner <= store.index().entry_count()) {
                const format::Entry& e = store.index().entry(owner - 1);
                v.container_id = fixed(e.container_id, sizeof e.container_id);
                v.ifname = fixed(e.ifname, sizeof e.ifname);
                v.pod = fixed(e.pod, sizeof e.pod);
                v.imported = (e.flags & format::kEntryFlagImported) != 0;
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

Expected<VerifyReport> verify(NetworkStore& store) {
    VerifyReport rep;
    auto add = [&](std::string kind, std::string detail) {
        rep.violations.push_back({std::move(kind), std::move(detail)});
    };
    shm::IndexFile& idx = store.index();

    // Leases held by dead processes: their work was never healed.
    auto& leases = idx.leases();
    for (uint32_t i = 0; i < leases.size(); ++i) {
        const uint64_t w = leases.word(i);
        if (shm::LeaseTable::pid_of(w) == 0) continue;
        if (leases.judge(i, w, store.self()) == shm::Holder::kDead) {
            add("dead-lease", "lease " + std::to_string(i) + " is held by dead pid " +
                                  std::to_string(shm::LeaseTable::pid_of(w)));
        }
    }

    // Entries: consistent states, fingerprints, references.
    std::map<std::pair<int, u128>, uint64_t> address_owner;  // address -> committed entry
    std::set<std::pair<uint64_t, uint64_t>> seen_fps;
    for (uint64_t e = 0; e < idx.entry_count(); ++e) {
        const format::Entry& ent = idx.entry(e);
        const uint64_t w = shm::load_word(ent.state);
        const EntryWord ew = EntryWord::decode(w);
        if (ew.state == EntryState::kEmpty || ew.state == EntryState::kTombstone) continue;
        ++rep.entries_checked;
        const std::string name = "entry " + std::to_string(e) + " (" +
                                 fixed(ent.container_id, sizeof ent.container_id) + "/" +
                                 fixed(ent.ifname, sizeof ent.ifname) + ")";
        if (int(ew.state) > int(EntryState::kTombstone)) {
            add("invalid-entry-state", name + " has state " + std::to_string(int(ew.state)));
            continue;
        }
        if (ew.state == EntryState::kClaiming || ew.state == EntryState::kReleasing) {
            if (!lease_live(store, ew.lease_index, ew.lease_gen)) {
                add("stuck-entry",
                    name + " is " + (ew.state == EntryState::kClaiming ? "claiming" : "releasing") +
                        " for a lease whose holder is gone");
            }
            continue;
        }
        auto fp = AttachmentIndex::read_fp(ent, w);
        if (!fp) {
            add("bad-fingerprint", name + " is committed but its fingerprint is not stamped");
            continue;
        }
        if (!seen_fps.insert({fp->fp1, fp->fp2}).second) {
            add("duplicate-attachment", name + " is committed twice in the index");
        }
        const size_t n = std::min<size_t>(ent.ref_count, format::kMaxRangeSets);
        for (size_t r = 0; r < n; ++r) {
            const format::AddressRef& ref = ent.refs[r];
            if (ref.family != 4 && ref.family != 6) {
                // host-local's state may have had fewer range sets than today's config.
                if ((ent.flags & (format::kEntryFlagImported | format::kEntryFlagPartial)) == 0) {
                    add("missing-ref", name + " has no address for range set " + std::to_string(r));
                }
                continue;
            }
            const IpAddress a = ref_address(ref);
            auto [it, fresh] = address_owner.insert({{int(a.family), a.value}, e});
            if (!fresh) {
                add("duplicate-address", a.to_string() + " is held by " + name + " and by entry " +
                                             std::to_string(it->second));
            }
            auto block = store.block_for(a, false);
            if (!block) return block.error();
            if (*block == nullptr) {
                add("dangling-ref",
                    name + " holds " + a.to_string() + " whose block does not exist");
                continue;
            }
            const uint64_t s = store.slot_of(a);
            const SlotWord sw = SlotWord::decode(slot_ops::load_state(**block, s));
            if (!sw.owned_by(e, ew.gen)) {
                add("dangling-ref", name + " holds " + a.to_string() + " but its slot is " +
                                        slot_state_name(sw.state) +
                                        (sw.state == SlotState::kAllocated
                                             ? " owned by entry " + std::to_string(sw.owner_entry())
                                             : std::string()));
            }
        }
    }

    // The journal: every allocated address must survive a rebuild, so its newest record must be
    // its allocation, by the same attachment.
    auto scan = shm::Journal::scan(store.journal().dir());
    if (!scan) return scan.error();
    rep.journal_records = scan->records.size();
    rep.journal_invalid = scan->invalid;
    const auto newest = newest_records(scan->records);

    // Slots: valid states, owners that hold them, no stuck transitions.
    auto blocks = store.all_blocks();
    if (!blocks) return blocks.error();
    for (shm::BlockFile* b : *blocks) {
        const IpAddress base = block_base(*b);
        for (uint64_t i = 0; i < b->slot_count(); ++i) {
            ++rep.slots_checked;
            const uint64_t w = slot_ops::load_state(*b, i);
            const SlotWord sw = SlotWord::decode(w);
            const IpAddress a{base.value + i, base.family};
            const bool bit = (shm::load_word(b->bitmap()[i / 64]) >> (i % 64)) & 1;
            if (bit != slot_ops::busy(sw.state)) ++rep.hint_mismatches;
            if (int(sw.state) > int(SlotState::kSticky)) {
                add("invalid-slot-state",
                    a.to_string() + " has state " + std::to_string(int(sw.state)));
                continue;
            }
            if (sw.state == SlotState::kClaiming || sw.state == SlotState::kReleasing) {
                if (!lease_live(store, sw.lease_index, sw.lease_gen)) {
                    add(sw.state == SlotState::kClaiming ? "stuck-claim" : "stuck-release",
                        a.to_string() + " is " + slot_state_name(sw.state) +
                            " for a lease whose holder is gone");
                }
                continue;
            }
            if (sw.state != SlotState::kAllocated) continue;
            if (!journaled(newest, a, shm::load_word(b->slot(i).owner_fp))) {
                add("unjournaled-allocation",
                    a.to_string() +
                        " is allocated but the journal's newest record for it is "
                        "not that allocation: a rebuild would lose it");
            }
            const uint64_t owner = uint64_t(sw.owner_entry()) + 1;
            if (slot_ops::owner_entry_plus_one(shm::load_word(b->slot(i).owner)) != owner) {
                add("owner-mismatch", a.to_string() + " is allocated to entry " +
                                          std::to_string(owner - 1) +
                                          " but its owner field names another");
            }
            auto it = address_owner.find({int(a.family), a.value});
            if (it != address_owner.end() && it->second + 1 == owner) continue;
            // Allocated to an entry that is still being claimed by a live ADD is fine.
            if (owner != 0 && owner <= idx.entry_count()) {
                const EntryWord ew = EntryWord::decode(shm::load_word(idx.entry(owner - 1).state));
                if (ew.state == EntryState::kClaiming &&
                    lease_live(store, ew.lease_index, ew.lease_gen)) {
                    continue;
                }
            }
            add("orphan-allocation",
                a.to_string() + " is allocated but no committed attachment holds it");
        }
    }
    return rep;
}

}  // namespace shmipam::engine
