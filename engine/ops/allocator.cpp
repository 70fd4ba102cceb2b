#include "engine/ops/allocator.h"

#include <unistd.h>

#include <cstring>
#include <functional>
#include <set>

#include "engine/slots/attachment_index.h"
#include "engine/slots/entry_fields.h"
#include "engine/state/journal_records.h"
#include "engine/policy/next_fit.h"
#include "engine/recovery/recovery.h"
#include "engine/slots/slot_ops.h"
#include "shm/atomic_word.h"
#include "base/clock.h"
#include "base/fault_point.h"

namespace shmipam::engine {

using format::EntryState;
using shm::EntryWord;

namespace {

// Holds a lease for the duration of one operation.
class LeaseGuard {
  public:
    explicit LeaseGuard(NetworkStore& store) : store_(store) {}
    ~LeaseGuard() {
        if (!held_) return;
        // A freed lease must never name unfinished work.
        settle_own_work(store_, handle_);
        store_.set_active_lease(nullptr);
        store_.index().leases().release(handle_);
    }
    LeaseGuard(const LeaseGuard&) = delete;
    LeaseGuard& operator=(const LeaseGuard&) = delete;

    Status acquire() {
        for (int attempt = 0; attempt < 3; ++attempt) {
            auto h = store_.index().leases().acquire(store_.self());
            if (h) {
                handle_ = *h;
                held_ = true;
                store_.set_active_lease(&handle_);  // journal appends carry its intent
                return Ok{};
            }
            // Full: dead holders may be hogging leases.
            if (reap_dead_leases(store_) == 0) usleep(10'000);
        }
        return make_error(Code::kTryAgainLater, "every lease of the network is held");
    }
    const shm::LeaseHandle& handle() const { return handle_; }

  private:
    NetworkStore& store_;
    shm::LeaseHandle handle_;
    bool held_ = false;
};

AttachmentIndex make_index(NetworkStore& store) {
    return AttachmentIndex(store.index(), [&store](uint64_t entry_index, uint64_t entry_word) {
        return heal_entry_if_orphaned(store, entry_index, entry_word);
    });
}

// How long a DEL waits for a concurrent ADD or DEL of the same attachment to finish.
constexpr int kBusyWaitMs = 2000;

}  // namespace

Expected<std::vector<std::optional<IpAddress>>> Allocator::map_requests(
    const std::vector<IpAddress>& requested) {
    std::vector<std::optional<IpAddress>> per_set(cfg_.range_sets.size());
    for (const IpAddress& a : requested) {
        bool placed = false;
        for (size_t s = 0; s < cfg_.range_sets.size() && !placed; ++s) {
            const RangeSet& set = cfg_.range_sets[s];
            if (!range_index_for(set, a)) continue;
            if (excluded_in_set(set, a)) {
                return make_error(Code::kRequestedAddressInvalid,
                                  "requested IP address " + a.to_string() +
                                      " is a network, broadcast or gateway address");
            }
            if (per_set[s]) {
                return make_error(
                    Code::kRequestedAddressInvalid,
                    "more than one requested IP address in range set " + to_string(set));
            }
            per_set[s] = a;
            placed = true;
        }
        if (!placed) {
            return make_error(Code::kRequestedAddressInvalid,
                              "requested IP address " + a.to_string() + " is not in any range");
        }
    }
    return per_set;
}

Expected<std::vector<AllocatedAddress>> Allocator::describe(uint64_t entry_index,
                                                            uint64_t entry_word) {
    const format::Entry& e = store_.index().entry(entry_index);
    const size_t n = std::min<size_t>(e.ref_count, format::kMaxRangeSets);
    format::AddressRef refs[format::kMaxRangeSets] = {};
    std::copy(e.refs, e.refs + n, refs);
    std::atomic_thread_fence(std::memory_order_acquire);
    // Copied while the entry was still that attachment's (seqlock-style re-check): a DEL and a
    // reuse of the entry in between would otherwise hand back another attachment's addresses.
    if (shm::load_word(store_.index().entry(entry_index).state) != entry_word) {
        return make_error(Code::kTryAgainLater, "the attachment changed while being read");
    }
    std::vector<AllocatedAddress> out;
    for (size_t r = 0; r < n; ++r) {
        const format::AddressRef& ref = refs[r];
        if (ref.family != 4 && ref.family != 6) continue;
        AllocatedAddress aa{ref_address(ref), ref.range_set, nullptr};
        for (size_t s = 0; s < cfg_.range_sets.size() && aa.range == nullptr; ++s) {
            if (auto i = range_index_for(cfg_.range_sets[s], aa.address)) {
                aa.range = &cfg_.range_sets[s][*i];
                aa.range_set = s;
            }
        }
        if (aa.range == nullptr) {
            return make_error(Code::kInvalidConfig,
                              "the attachment holds " + aa.address.to_string() +
                                  ", which is outside every configured range");
        }
        out.push_back(aa);
    }
    return out;
}

namespace {
Error retired_error() {
    return make_error(Code::kTryAgainLater,
                      "the network's state was retired; the next invocation rebuilds it");
}
}  // namespace

Expected<AddOutcome> Allocator::add(const AddRequest& req) {
    auto requests = map_requests(req.requested);
    if (!requests) return requests.error();
    if (cfg_.range_sets.size() > format::kMaxRangeSets) {
        return make_error(Code::kInvalidConfig, "at most " + std::to_string(format::kMaxRangeSets) +
                                                    " range sets are supported");
    }
    LeaseGuard lease(store_);
    if (auto st = lease.acquire(); !st) return st.error();
    if (store_.retired()) return retired_error();
    reap_dead_leases(store_);

    const Fingerprint fp = fingerprint(req.key.container_id, req.key.ifname);
    AttachmentIndex index = make_index(store_);
    const EntryClaim claim = index.claim(fp, lease.handle());
    switch (claim.kind) {
        case ClaimKind::kExisting: {
            if (store_.index().entry(claim.entry.index).flags & format::kEntryFlagPartial) {
                return make_error(Code::kAttachmentIncomplete,
                                  "the attachment holds addresses for only some range sets "
                                  "(rebuilt after its ADD failed): DEL it, then ADD again");
            }
            auto addrs = describe(claim.entry.index, claim.entry.word);
            if (!addrs) return addrs.error();
            return AddOutcome{std::move(*addrs), true};
        }
        case ClaimKind::kBusy:
            shm::bump_counter(store_.index().header().busy_rejections);
            return make_error(Code::kTryAgainLater, "another ADD for container " +
                                                        req.key.container_id + " interface " +
                                                        req.key.ifname + " is in progress");
        case ClaimKind::kFull:
            return make_error(Code::kIndexFull, "the network's attachment index is full",
                              std::to_string(store_.index().entry_count()) + " entries");
        case ClaimKind::kClaimed:
            break;
    }
    const uint64_t e = claim.entry.index;
    const uint64_t entry_word = claim.entry.word;
    format::Entry& ent = store_.index().entry(e);
    ent.created_unix_ns = base::unix_ns();
    ent.flags = 0;
    copy_truncated(ent.ifname, sizeof ent.ifname, req.key.ifname);
    copy_truncated(ent.container_id, sizeof ent.container_id, req.key.container_id);
    const std::string pod = req.pod.name.empty() ? "" : req.pod.namespace_ + "/" + req.pod.name;
    copy_truncated(ent.pod, sizeof ent.pod, pod);
    std::memset(ent.refs, 0, sizeof ent.refs);
    std::atomic_thread_fence(std::memory_order_release);
    ent.ref_count = uint8_t(cfg_.range_sets.size());

    std::vector<ClaimedSlot> claimed;
    size_t current_set = 0;
    ArenaScanner scanner(store_, lease.handle(), slot_healer(store_));
    ClaimContext ctx{scanner, store_.index().header().cursor, cfg_.reuse_delay_ms * 1'000'000,
                     base::boot_ns(), [&](const IpAddress& a) {
                         format::AddressRef& ref = ent.refs[current_set];
                         auto b = a.to_bytes();
                         std::copy(b.begin(), b.end(), ref.address);
                         ref.family = uint8_t(a.family);
                         ref.block_prefix = store_.block_prefix(a.family);
                         ref.range_set = uint8_t(current_set);
                         std::atomic_thread_fence(std::memory_order_seq_cst);
                         SHMIPAM_FAULT("add.before_slot_claim");
                     }};
    // Every range set keeps its slot CLAIMING until all have one; then they publish together.
    for (current_set = 0; current_set < cfg_.range_sets.size(); ++current_set) {
        const RangeSet& set = cfg_.range_sets[current_set];
        auto got = (*requests)[current_set] ? claim_requested(ctx, set, *(*requests)[current_set])
                                            : claim_next(ctx, set, current_set);
        if (!got) {
            roll_back_claim(store_, e, entry_word, /*alloc_may_be_journaled=*/false);
            return got.error();
        }
        claimed.push_back(*got);
        SHMIPAM_FAULT("add.after_slot_claim");
    }
    const uint64_t now = base::unix_ns();
    const uint16_t tenancy = EntryWord::decode(entry_word).gen;
    // Journal the allocation before anyone can see it: durable (per the sync mode) before the
    // commit, so before the result is printed.
    {
        const AttachmentText text{req.key.container_id, req.key.ifname, pod, 0, now};
        std::vector<format::JournalRecord> records;
        for (size_t s = 0; s < claimed.size(); ++s) {
            const IpAddress& a = claimed[s].address;
            records.push_back(make_record(
                format::JournalOp::kAlloc, a, store_.block_prefix(a.family), s,
                shm::SlotWord::decode(claimed[s].word).gen + 1, fp, text, store_.boot_id(), now));
        }
        if (auto st = store_.append_journal(records); !st) {
            roll_back_claim(store_, e, entry_word);
            return st.error();
        }
        // Retired since we started: a rebuild may already have read the journal without these
        // records, so this claim must not commit here (the runtime retries on the new state).
        if (store_.retired()) {
            roll_back_claim(store_, e, entry_word);
            return retired_error();
        }
    }
    bool published = true;
    for (size_t s = 0; s < claimed.size() && published; ++s) {
        published = slot_ops::publish(*claimed[s].block, claimed[s].slot, claimed[s].word, e, s,
                                      tenancy, fp.fp1, now);
        SHMIPAM_FAULT("add.after_publish");
    }
    // The commit point. It fails only if a healer judged this invocation dead and rolled the
    // claim back (a process stopped for long in another pid namespace): then nothing is held.
    SHMIPAM_FAULT("add.before_commit");
    if (!published || !index.commit(claim.entry, fp)) {
        roll_back_claim(store_, e, entry_word);
        return make_error(Code::kTryAgainLater, "the claim was rolled back by another invocation");
    }
    SHMIPAM_FAULT("add.after_commit");
    shm::bump_counter(store_.index().header().adds);
    const uint64_t committed = EntryWord::next(entry_word, EntryState::kCommitted, fp.fp16());
    auto addrs = describe(e, committed);
    if (!addrs) return addrs.error();
    return AddOutcome{std::move(*addrs), false};
}

Allocator::Released Allocator::release_entry(uint64_t entry_index, uint64_t word,
                                             const shm::LeaseHandle& lease) {
    AttachmentIndex index = make_index(store_);
    store_.index().leases().set_target(lease, entry_index, EntryWord::decode(word).gen);
    SHMIPAM_FAULT("del.after_target");
    uint64_t releasing = 0;
    if (!index.begin_release({entry_index, word}, lease, &releasing)) return Released::kChanged;
    SHMIPAM_FAULT("del.after_entry_release");
    if (!complete_release(store_, entry_index, releasing)) return Released::kIo;
    shm::bump_counter(store_.index().header().dels);
    return Released::kDone;
}

Status Allocator::del(const AttachmentKey& key) {
    LeaseGuard lease(store_);
    if (auto st = lease.acquire(); !st) return st.error();
    if (store_.retired()) return retired_error();
    reap_dead_leases(store_);
    const Fingerprint fp = fingerprint(key.container_id, key.ifname);
    AttachmentIndex index = make_index(store_);
    for (int pass = 0; pass < kBusyWaitMs; ++pass) {
        bool busy = false;
        bool changed = false;
        for (const EntryRef& e : index.find(fp)) {
            const EntryWord w = EntryWord::decode(e.word);
            if (w.state == EntryState::kCommitted) {
                const Released r = release_entry(e.index, e.word, lease.handle());
                if (r == Released::kIo) {
                    return make_error(Code::kIo,
                                      "cannot complete the release: the journal cannot be "
                                      "written or a block arena cannot be opened",
                                      store_.dir());
                }
                if (r == Released::kChanged) changed = true;
            } else if (heal_entry_if_orphaned(store_, e.index, e.word)) {
                changed = true;
            } else {
                busy = true;  // a live ADD or DEL of the same attachment: let it finish
            }
        }
        // A release journaled on a retired state may have missed the rebuild: say so, and the
        // runtime's retry finds the attachment (or nothing) in the new state.
        if (store_.retired()) return retired_error();
        if (!busy && !changed) return Ok{};
        if (busy || pass > 8) usleep(1000);  // look again, politely
    }
    return make_error(Code::kTryAgainLater, "another operation on container " + key.container_id +
                                                " interface " + key.ifname + " is in progress");
}

Expected<std::vector<AllocatedAddress>> Allocator::addresses_of(const AttachmentKey& key) {
    const Fingerprint fp = fingerprint(key.container_id, key.ifname);
    AttachmentIndex index = make_index(store_);
    for (const EntryRef& e : index.find(fp)) {
        if (EntryWord::decode(e.word).state == EntryState::kCommitted) {
            return describe(e.index, e.word);
        }
    }
    return make_error(Code::kCheckNoAllocation, "no address is allocated to container " +
                                                    key.container_id + " interface " + key.ifname);
}

Expected<GcOutcome> Allocator::gc(const std::vector<AttachmentKey>& valid) {
    std::set<std::pair<uint64_t, uint64_t>> keep;
    for (const auto& k : valid) {
        const Fingerprint f = fingerprint(k.container_id, k.ifname);
        keep.insert({f.fp1, f.fp2});
    }
    auto released = release_where(
        [&](const format::Entry&, const Fingerprint& f) {
            return keep.count({f.fp1, f.fp2}) == 0;
        },
        false);
    if (!released) return released.error();
    return GcOutcome{released->size()};
}

namespace {

ReleasedAttachment view_of(const format::Entry& e) {
    ReleasedAttachment r;
    r.container_id = std::string(e.container_id, strnlen(e.container_id, sizeof e.container_id));
    r.ifname = std::string(e.ifname, strnlen(e.ifname, sizeof e.ifname));
    r.pod = std::string(e.pod, strnlen(e.pod, sizeof e.pod));
    for (size_t k = 0; k < std::min<size_t>(e.ref_count, format::kMaxRangeSets); ++k) {
        if (e.refs[k].family == 4 || e.refs[k].family == 6)
            r.addresses.push_back(ref_address(e.refs[k]));
    }
    return r;
}

}  // namespace

Expected<std::vector<ReleasedAttachment>> Allocator::release_where(const EntryFilter& filter,
                                                                   bool dry_run) {
    if (store_.retired()) return retired_error();
    LeaseGuard lease(store_);
    if (!dry_run) {
        if (auto st = lease.acquire(); !st) return st.error();
        reap_dead_leases(store_);
    }
    std::vector<ReleasedAttachment> out;
    shm::IndexFile& idx = store_.index();
    for (uint64_t i = 0; i < idx.entry_count(); ++i) {
        const uint64_t w = shm::load_word(idx.entry(i).state);
        if (EntryWord::decode(w).state != EntryState::kCommitted) continue;
        auto f = AttachmentIndex::read_fp(idx.entry(i), w);
        if (!f || !filter(idx.entry(i), *f)) continue;
        ReleasedAttachment view = view_of(idx.entry(i));
        if (dry_run) {
            out.push_back(std::move(view));
            continue;
        }
        const Released r = release_entry(i, w, lease.handle());
        if (r == Released::kIo) {
            return make_error(Code::kIo,
                              "cannot complete a release: the journal cannot be written or a "
                              "block arena cannot be opened",
                              store_.dir());
        }
        if (r == Released::kDone) out.push_back(std::move(view));
    }
    return out;
}

Expected<std::vector<ReleasedAttachment>> Allocator::release_address(const IpAddress& address,
                                                                     bool dry_run) {
    auto block = store_.block_for(address, false);
    if (!block) return block.error();
    std::vector<ReleasedAttachment> none;
    if (*block == nullptr) return none;
    const shm::SlotWord sw =
        shm::SlotWord::decode(slot_ops::load_state(**block, store_.slot_of(address)));
    if (sw.state != format::SlotState::kAllocated ||
        sw.owner_entry() >= store_.index().entry_count()) {
        return none;
    }
    // Release the owner only in the tenancy that holds the address now: the generation check
    // that keeps a concurrent DEL + ADD of the address safe.
    const uint64_t owner = sw.owner_entry();
    const uint64_t word = shm::load_word(store_.index().entry(owner).state);
    const uint16_t tenancy = EntryWord::decode(word).gen;
    return release_where(
        [&, word](const format::Entry& e, const Fingerprint&) {
            return &e == &store_.index().entry(owner) && sw.owned_by(owner, tenancy) &&
                   shm::load_word(e.state) == word;
        },
        dry_run);
}

Status Allocator::status() {
    reap_dead_leases(store_);  // STATUS sweeps what dead invocations left
    for (size_t s = 0; s < cfg_.range_sets.size(); ++s) {
        auto ok = can_serve(store_, cfg_.range_sets[s]);
        if (!ok) return ok.error();
        if (!*ok) {
            return make_error(Code::kUnavailable, "no IP addresses available in range set " +
                                                      to_string(cfg_.range_sets[s]));
        }
    }
    return Ok{};
}

}  // namespace shmipam::engine
