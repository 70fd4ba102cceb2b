#include "engine/recovery/rebuild.h"

#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include "engine/policy/next_fit.h"
#include "engine/slots/entry_fields.h"
#include "engine/state/journal_records.h"
#include "shm/atomic_word.h"
#include "shm/codec.h"

namespace shmipam::engine {

using format::JournalOp;
using format::JournalRecord;

Expected<RebuildStats> rebuild_from_journal(const NetworkConfig& cfg,
                                            const shm::Journal::ScanResult& scan,
                                            shm::IndexFile& aside, const BlockOpener& open_block,
                                            const std::array<uint8_t, 16>& boot_id,
                                            uint64_t now_unix_ns, uint64_t now_boot_ns) {
    RebuildStats stats;
    AsideBuilder builder(aside, cfg.range_sets.size());
    std::map<std::pair<uint64_t, uint64_t>, uint64_t> entry_of;  // fingerprint -> entry
    std::map<size_t, const JournalRecord*> last_alloc_in_set;    // for the cursors
    const uint64_t reuse_ns = cfg.reuse_delay_ms * 1'000'000;
    stats.newest = shm::Journal::newest_per_address(scan.records);
    // A claim outlives its sandboxes, and so the boot they ran in.
    auto reclaimed = [&](const JournalRecord& r) {
        return cfg.reclaim_on_reboot && !held_for_a_name(r.flags) &&
               std::memcmp(r.boot_id, boot_id.data(), 16) != 0;
    };
    // One address per attachment and range set: the newest ALLOC (journal order) wins. Two live
    // ALLOCs of one attachment in one set happen when an ADD's ALLOC was written and its
    // ROLLBACK was not (the append failed), and the runtime's retry got another address. The
    // older one is freed, and its ROLLBACK journaled now, so that no later rebuild gives it back.
    std::map<std::tuple<uint64_t, uint64_t, uint8_t>, const JournalRecord*> newest_alloc;
    // Claims with a record of this boot: a sandbox of this boot may be using them.
    std::set<std::pair<uint64_t, uint64_t>> claims_of_this_boot;
    for (const JournalRecord& r : stats.newest) {
        if (JournalOp(r.op) != JournalOp::kAlloc || reclaimed(r)) continue;
        const JournalRecord*& cur = newest_alloc[{r.fp1, r.fp2, r.range_set}];
        if (cur == nullptr || r.sequence > cur->sequence) cur = &r;
        if (held_for_a_name(r.flags) && std::memcmp(r.boot_id, boot_id.data(), 16) == 0) {
            claims_of_this_boot.insert({r.fp1, r.fp2});
        }
    }
    for (const JournalRecord& winner : stats.newest) {
        const JournalRecord* r = &winner;
        const IpAddress a = record_address(*r);
        const auto op = JournalOp(r->op);
        if (op == JournalOp::kAlloc) {
            if (reclaimed(*r)) {
                ++stats.reclaimed_after_reboot;
                builder.set_slot(a, r->block_prefix, r->slot_gen, false, 0);
                continue;
            }
            if (newest_alloc.at({r->fp1, r->fp2, r->range_set}) != r) {
                builder.set_slot(a, r->block_prefix, r->slot_gen, false, 0);
                JournalRecord rollback = *r;
                rollback.op = uint8_t(JournalOp::kRollback);
                rollback.slot_gen = r->slot_gen + 1;
                stats.superseded.push_back(rollback);
                continue;
            }
            const Fingerprint fp{r->fp1, r->fp2};
            auto [it, fresh] = entry_of.insert({{fp.fp1, fp.fp2}, 0});
            if (fresh) {
                const AttachmentText text{fixed(r->container_id, sizeof r->container_id),
                                          fixed(r->ifname, sizeof r->ifname),
                                          fixed(r->pod, sizeof r->pod),
                                          uint8_t(r->flags),
                                          r->unix_ns,
                                          r->claim_keep_idle};
                // A claim's sandbox is not journaled. A claim whose records are all of earlier
                // boots was bound by no sandbox of this boot (binding it first writes its records
                // again with this boot's id): idle from now. Otherwise a sandbox of this boot may
                // still use it, unknown to the new index (docs/fixed-ips.md, "Rebuilds").
                const bool earlier_boot = claims_of_this_boot.count({fp.fp1, fp.fp2}) == 0;
                const uint64_t binding =
                    earlier_boot ? shm::ClaimBinding::idle(now_unix_ns / 1'000'000'000) : 0;
                auto e = builder.add_entry(fp, text, binding, earlier_boot);
                if (earlier_boot && held_for_a_name(r->flags)) {
                    lower_claim_due(aside.header().claim_due,
                                    claim_due_at(r->claim_keep_idle, now_unix_ns / 1'000'000'000));
                }
                if (!e) return e.error();
                it->second = *e;
                ++stats.attachments;
            }
            builder.add_address(it->second, r->range_set, a, r->block_prefix, r->slot_gen, fp.fp1,
                                r->unix_ns);
            ++stats.addresses;
            auto& last = last_alloc_in_set[r->range_set];
            if (last == nullptr || r->sequence > last->sequence) last = r;
        } else if (op == JournalOp::kRelease && now_unix_ns >= r->unix_ns &&
                   now_unix_ns - r->unix_ns < reuse_ns) {
            // Still cooling: as if released (now_unix - unix_ns) ago on the boot clock.
            const uint64_t ago = now_unix_ns - r->unix_ns;
            builder.set_slot(a, r->block_prefix, r->slot_gen, true,
                             now_boot_ns > ago ? now_boot_ns - ago : 1);
            ++stats.cooling;
        } else {
            builder.set_slot(a, r->block_prefix, r->slot_gen, false, 0);
        }
    }
    // Attachments that hold fewer addresses than there are range sets (an ADD that never answered
    // lost some of its records) are kept, so DEL releases them, and flagged.
    for (const auto& [fp, e] : entry_of) {
        format::Entry& ent = aside.entry(e);
        for (size_t s = 0; s < std::min(cfg.range_sets.size(), format::kMaxRangeSets); ++s) {
            if (ent.refs[s].family == 0) ent.flags |= format::kEntryFlagPartial;
        }
    }
    if (auto st = builder.build_blocks(open_block); !st) return st.error();
    for (const auto& [set, r] : last_alloc_in_set) {
        if (set < cfg.range_sets.size() && set < format::kMaxRangeSets) {
            aside.header().cursor[set] = cursor_after(cfg.range_sets[set], record_address(*r));
        }
    }
    return stats;
}

}  // namespace shmipam::engine
