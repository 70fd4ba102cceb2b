// Fixed addresses (docs/fixed-ips.md, "Design"): a claim entry keyed by a name holds the
// addresses; the sandbox entry of whichever sandbox of the name was added last uses them. The
// claim's binding word says which sandbox, or since when nobody; every change of it is one CAS,
// so a bind, an unbind and an expiry of one claim are totally ordered.
#include <cstring>

#include "base/fault_point.h"
#include "engine/ops/allocator.h"
#include "engine/ops/lease_guard.h"
#include "engine/recovery/recovery.h"
#include "engine/slots/slot_ops.h"
#include "engine/state/journal_records.h"
#include "shm/atomic_word.h"

namespace shmipam::engine {

using format::EntryState;
using shm::ClaimBinding;
using shm::EntryWord;

namespace {

uint64_t due_at(uint64_t keep_idle, uint64_t idle_since_s) {
    return claim_due_at(keep_idle, idle_since_s);
}

bool committed_claim(const format::Entry& e, uint64_t word) {
    return EntryWord::decode(word).state == EntryState::kCommitted && held_for_a_name(e.flags);
}

// Times a fixed-address ADD starts over: each restart follows a change another invocation made
// to the name (its fixed claim freed or expiring, a concurrent ADD of the sandbox committed, the
// binding lost to a release); past a few in a row the name keeps changing, and the ADD answers
// 11 for the runtime to retry.
constexpr int kFixedAddressAddAttempts = 4;

}  // namespace

std::optional<EntryRef> Allocator::claim_of(uint64_t sandbox_entry, uint64_t sandbox_word) {
    const format::Entry& s = store_.index().entry(sandbox_entry);
    const uint64_t bound_claim = s.bound_claim;
    std::atomic_thread_fence(std::memory_order_acquire);
    // Read while the entry was still that sandbox's: a reused entry names another claim.
    if (shm::load_word(s.state) != sandbox_word) return std::nullopt;
    const auto [ci, tenancy] = shm::decode_bound_claim(bound_claim);
    if (ci >= store_.index().entry_count()) return std::nullopt;
    const format::Entry& c = store_.index().entry(ci);
    const uint64_t w = shm::load_word(c.state);
    if (!committed_claim(c, w) || EntryWord::decode(w).gen != tenancy) return std::nullopt;
    return EntryRef{ci, w};
}

bool Allocator::sandbox_alive(uint64_t entry_index, uint16_t tenancy) {
    if (entry_index >= store_.index().entry_count()) return false;
    const format::Entry& e = store_.index().entry(entry_index);
    const EntryWord w = EntryWord::decode(shm::load_word(e.state));
    return w.state == EntryState::kCommitted && w.gen == tenancy && uses_a_claim(e.flags);
}

void Allocator::lower_due(uint64_t due_s) {
    lower_claim_due(store_.index().header().claim_due, due_s);
}

Status Allocator::rejournal(const EntryRef& claim) {
    format::Entry& c = store_.index().entry(claim.index);
    if (shm::load_word(c.claim.records_of_earlier_boot) == 0) return Ok{};
    auto fp = AttachmentIndex::read_fp(c, claim.word);
    if (!fp) return make_error(Code::kTryAgainLater, "the claim changed while being bound");
    const uint64_t now = base::unix_ns();
    const AttachmentText text{fixed(c.container_id, sizeof c.container_id),
                              fixed(c.ifname, sizeof c.ifname),
                              pod_of(c),
                              c.flags,
                              now,
                              c.claim.keep_idle};
    std::vector<format::JournalRecord> records;
    for (size_t k = 0; k < std::min<size_t>(c.ref_count, format::kMaxRangeSets); ++k) {
        const format::AddressRef& ref = c.refs[k];
        if (ref.family != 4 && ref.family != 6) continue;
        const IpAddress a = ref_address(ref);
        auto block = store_.block_for(a, false);
        if (!block || *block == nullptr) {
            return make_error(Code::kIo, "cannot open the block of " + a.to_string(), store_.dir());
        }
        const shm::SlotWord sw =
            shm::SlotWord::decode(slot_ops::load_state(**block, store_.slot_of(a)));
        if (!sw.owned_by(claim.index, EntryWord::decode(claim.word).gen)) {
            return make_error(Code::kTryAgainLater, "the claim changed while being bound");
        }
        // The same slot generation as the claim's ALLOC: replay keeps the later of the two.
        records.push_back(make_record(format::JournalOp::kAlloc, a, ref.block_prefix, ref.range_set,
                                      sw.gen, *fp, text, store_.boot_id(), now));
    }
    if (auto st = store_.append_journal(records); !st) return st.error();
    if (shm::load_word(c.state) != claim.word) {
        return make_error(Code::kTryAgainLater, "the claim changed while being bound");
    }
    shm::store_word(c.claim.records_of_earlier_boot, 0);
    return Ok{};
}

Allocator::Bound Allocator::bind(const EntryRef& claim, uint64_t sandbox_entry,
                                 uint64_t sandbox_word) {
    format::Entry& c = store_.index().entry(claim.index);
    const format::Entry& sandbox = store_.index().entry(sandbox_entry);
    const uint16_t tenancy = EntryWord::decode(sandbox_word).gen;
    const uint64_t created = sandbox.created_unix_ns;
    const uint64_t desired = ClaimBinding::bound(sandbox_entry, tenancy);
    for (;;) {
        if (shm::load_word(c.state) != claim.word) return Bound::kClaimGoing;
        if (shm::load_word(sandbox.state) != sandbox_word) return Bound::kSandboxGone;
        uint64_t w = shm::load_word(c.claim.binding);
        const ClaimBinding b = ClaimBinding::decode(w);
        if (b.kind == ClaimBinding::Kind::kExpiring) return Bound::kClaimGoing;
        if (w == desired) return Bound::kDone;
        // The design document's forced update: the newest sandbox of the name takes the claim
        // over, and an older one (a repeated ADD of it) never takes it back.
        if (b.kind == ClaimBinding::Kind::kBound && sandbox_alive(b.entry, b.tenancy) &&
            store_.index().entry(b.entry).created_unix_ns > created) {
            return Bound::kNewerSandbox;
        }
        SHMIPAM_FAULT("claim.before_bind");
        if (!shm::cas_word(c.claim.binding, w, desired)) continue;
        // Released and claimed anew meanwhile (its binding word equal by chance): give the new
        // tenancy back what it had.
        if (shm::load_word(c.state) != claim.word) {
            uint64_t mine = desired;
            shm::cas_word(c.claim.binding, mine, w);
            return Bound::kClaimGoing;
        }
        // The sandbox was released meanwhile (a DEL that tried to unbind before this bind, and
        // tries again after its release: one of the two re-checks sees the other): idle.
        if (shm::load_word(sandbox.state) != sandbox_word) {
            const uint64_t now = now_s();
            lower_due(claim_due_at(c.claim.keep_idle, now));
            uint64_t mine = desired;
            shm::cas_word(c.claim.binding, mine, ClaimBinding::idle(now));
            return Bound::kSandboxGone;
        }
        return Bound::kDone;
    }
}

std::optional<EntryRef> Allocator::unbind(const EntryRef& claim, uint64_t sandbox_entry,
                                          uint64_t sandbox_word) {
    format::Entry& c = store_.index().entry(claim.index);
    const uint64_t mine = ClaimBinding::bound(sandbox_entry, EntryWord::decode(sandbox_word).gen);
    if (shm::load_word(c.claim.binding) != mine) return std::nullopt;
    const bool free_now = c.claim.keep_idle == format::kKeepIdleNone;
    const uint64_t now = now_s();
    // Due before the CAS: a DEL that dies between the two still leaves the claim to be met.
    const uint64_t due = free_now ? now : claim_due_at(c.claim.keep_idle, now);
    lower_due(due);
    uint64_t w = mine;
    if (!shm::cas_word(c.claim.binding, w,
                       free_now ? ClaimBinding::expiring() : ClaimBinding::idle(now))) {
        return std::nullopt;  // a newer sandbox holds it, or it is going anyway
    }
    SHMIPAM_FAULT("claim.after_unbind");
    if (shm::load_word(c.state) != claim.word) return std::nullopt;
    lower_due(due);  // again: a walk that ran between the first lowering and the CAS missed it
    if (free_now) return claim;
    return std::nullopt;
}

bool Allocator::mark_expiring(uint64_t claim_index, uint64_t claim_word,
                              std::optional<uint64_t> only_from) {
    format::Entry& c = store_.index().entry(claim_index);
    // Due now first: a release that dies once the claim is marked is completed by the next
    // invocation.
    lower_due(now_s());
    for (;;) {
        if (shm::load_word(c.state) != claim_word) return false;
        uint64_t b = shm::load_word(c.claim.binding);
        if (b == ClaimBinding::expiring()) return true;
        if (only_from && b != *only_from) return false;  // bound (or rebound) meanwhile
        const uint64_t before = b;
        SHMIPAM_FAULT("claim.before_mark");
        if (!shm::cas_word(c.claim.binding, b, ClaimBinding::expiring())) continue;
        if (shm::load_word(c.state) != claim_word) {
            // Another tenancy of the entry, whose word happened to equal: not ours to mark.
            uint64_t expiring = ClaimBinding::expiring();
            shm::cas_word(c.claim.binding, expiring, before);
            return false;
        }
        return true;
    }
}

Expected<AddOutcome> Allocator::add_for_claim(const AddRequest& req,
                                              const std::vector<std::optional<IpAddress>>& requests,
                                              const shm::LeaseHandle& lease) {
    const ClaimSpec& spec = *req.claim;
    const Fingerprint sandbox_fp = fingerprint(req.key.container_id, req.key.ifname);
    const Fingerprint claim_fp = fingerprint(spec.key, req.key.ifname);
    const std::string pod = req.pod.name.empty() ? "" : req.pod.namespace_ + "/" + req.pod.name;
    const AttachmentText claim_text{spec.key, req.key.ifname, pod, format::kEntryFlagClaim,
                                    0,        spec.keep_idle};
    AttachmentIndex index = make_index(store_);
    if (claims_due()) (void)expire_claims_with(lease);
    for (int attempt = 0; attempt < kFixedAddressAddAttempts; ++attempt) {
        // a) A repeated ADD of this sandbox answers what it uses.
        std::optional<EntryRef> mine;
        for (const EntryRef& e : index.find(sandbox_fp)) {
            if (EntryWord::decode(e.word).state == EntryState::kCommitted) mine = e;
        }
        if (mine) {
            if (!uses_a_claim(store_.index().entry(mine->index).flags)) {
                // Added before the pod was sticky: an ordinary attachment, answered as one.
                auto addrs = describe(mine->index, mine->word);
                if (!addrs) return addrs.error();
                return AddOutcome{std::move(*addrs), true};
            }
            if (auto claim = claim_of(mine->index, mine->word)) {
                if (auto st = rejournal(*claim); !st) return st.error();
                const Bound b = bind(*claim, mine->index, mine->word);
                if (b == Bound::kDone) {
                    auto addrs = describe(claim->index, claim->word);
                    if (!addrs) return addrs.error();
                    return AddOutcome{std::move(*addrs), true};
                }
                if (b == Bound::kNewerSandbox) {
                    return make_error(Code::kClaimMoved,
                                      "the addresses of " + spec.key +
                                          " moved to a newer sandbox of the pod: container " +
                                          req.key.container_id + " no longer holds them");
                }
            }
            // Its claim is gone (freed by its policy or an operator): end this sandbox's entry
            // and claim anew.
            if (release_entry(mine->index, mine->word, lease) == Released::kIo) {
                return make_error(Code::kIo, "cannot release a stale sandbox entry", store_.dir());
            }
            continue;
        }
        // b) The name's claim: the one it has, or a new one, idle until bound below (its due
        //    time set first: an ADD that dies before binding leaves it to its policy).
        lower_due(claim_due_at(spec.keep_idle, now_s()));
        auto claim =
            add_entry(claim_fp, claim_text, req, requests, lease, ClaimBinding::idle(now_s()));
        if (!claim && claim.error().code == Code::kNoAddressFree &&
            expire_claims_with(lease).value_or(0) > 0) {
            claim =
                add_entry(claim_fp, claim_text, req, requests, lease, ClaimBinding::idle(now_s()));
        }
        if (!claim) return claim.error();
        if (shm::load_word(store_.index().entry(claim->entry).claim.binding) ==
            ClaimBinding::expiring()) {
            // Being released (or left so by a release that died): complete it, claim anew.
            if (release_entry(claim->entry, claim->word, lease) == Released::kIo) {
                return make_error(Code::kIo, "cannot complete the release of claim " + spec.key,
                                  store_.dir());
            }
            continue;
        }
        SHMIPAM_FAULT("claim.after_claim_commit");
        const EntryRef claim_ref{claim->entry, claim->word};
        if (auto st = rejournal(claim_ref); !st) return st.error();
        // c) The sandbox's entry, naming the claim; it holds no slot itself.
        const EntryClaim sandbox = index.claim(sandbox_fp, lease);
        if (sandbox.kind == ClaimKind::kExisting) continue;  // a concurrent ADD of it: look again
        if (sandbox.kind == ClaimKind::kBusy) {
            shm::bump_counter(store_.index().header().busy_rejections);
            return make_error(Code::kTryAgainLater, "another ADD for container " +
                                                        req.key.container_id + " interface " +
                                                        req.key.ifname + " is in progress");
        }
        if (sandbox.kind == ClaimKind::kFull) {
            return make_error(Code::kIndexFull, "the network's attachment index is full",
                              std::to_string(store_.index().entry_count()) + " entries");
        }
        format::Entry& ent = store_.index().entry(sandbox.entry.index);
        ent.created_unix_ns = base::unix_ns();
        ent.ref_count = 0;
        ent.flags = format::kEntryFlagBinding;
        copy_truncated(ent.ifname, sizeof ent.ifname, req.key.ifname);
        copy_truncated(ent.container_id, sizeof ent.container_id, req.key.container_id);
        set_pod(ent, pod);
        set_network_tag(ent, req.network_tag);
        std::atomic_thread_fence(std::memory_order_release);
        ent.bound_claim = shm::encode_bound_claim(claim->entry, EntryWord::decode(claim->word).gen);
        SHMIPAM_FAULT("claim.before_sandbox_commit");
        if (!index.commit(sandbox.entry, sandbox_fp)) {
            roll_back_claim(store_, sandbox.entry.index, sandbox.entry.word);
            return make_error(Code::kTryAgainLater,
                              "the claim was rolled back by another invocation");
        }
        const uint64_t committed =
            EntryWord::next(sandbox.entry.word, EntryState::kCommitted, sandbox_fp.fp16());
        SHMIPAM_FAULT("claim.after_sandbox_commit");
        // d) Bind the claim to it.
        switch (bind(claim_ref, sandbox.entry.index, committed)) {
            case Bound::kDone:
                shm::bump_counter(store_.index().header().adds);
                return std::move(claim->outcome);
            case Bound::kNewerSandbox:
                (void)release_entry(sandbox.entry.index, committed, lease);
                return make_error(Code::kClaimMoved, "a newer sandbox of the pod holds " +
                                                         spec.key + " (added concurrently)");
            case Bound::kClaimGoing:
                (void)release_entry(sandbox.entry.index, committed, lease);
                continue;
            case Bound::kSandboxGone:
                return make_error(Code::kTryAgainLater, "container " + req.key.container_id +
                                                            " interface " + req.key.ifname +
                                                            " was deleted while being added");
        }
    }
    return make_error(Code::kTryAgainLater,
                      "the claim " + spec.key + " kept changing under this ADD: retry");
}

bool Allocator::claims_due() {
    const uint64_t due =
        shm::ClaimDue::decode(shm::load_word(store_.index().header().claim_due)).due_s;
    return due != 0 && now_s() >= due;
}

Expected<size_t> Allocator::expire_claims_with(const shm::LeaseHandle& lease) {
    shm::IndexFile& idx = store_.index();
    // The word as the walk began. The walk ends by setting it to the earliest due time it saw,
    // unless it changed meanwhile (a claim left idle, or marked, by another invocation): then
    // the past due time stays, and the next invocation walks again. A walk that dies leaves it
    // past as well.
    const uint64_t began = shm::load_word(idx.header().claim_due);
    const uint64_t now = now_s();
    uint64_t earliest = 0;
    const auto keep = [&](uint64_t due) {
        if (due != 0 && (earliest == 0 || due < earliest)) earliest = due;
    };
    size_t freed = 0;
    for (uint64_t i = 0; i < idx.entry_count(); ++i) {
        const uint64_t w = shm::load_word(idx.entry(i).state);
        format::Entry& c = idx.entry(i);
        if (!committed_claim(c, w)) continue;
        uint64_t bw = shm::load_word(c.claim.binding);
        const ClaimBinding b = ClaimBinding::decode(bw);
        bool release = b.kind == ClaimBinding::Kind::kExpiring;
        if (b.kind == ClaimBinding::Kind::kBound && !sandbox_alive(b.entry, b.tenancy)) {
            // Its sandbox ended without unbinding: idle from now.
            const uint64_t due = claim_due_at(c.claim.keep_idle, now);
            lower_due(due);
            if (shm::cas_word(c.claim.binding, bw, ClaimBinding::idle(now))) keep(due);
        } else if (b.kind == ClaimBinding::Kind::kIdle) {
            const uint64_t due = claim_due_at(c.claim.keep_idle, b.since_s);
            if (due != 0 && now >= due) {
                release = mark_expiring(i, w, bw);
            } else {
                keep(due);
            }
        }
        if (!release) continue;
        const Released r = release_entry(i, w, lease);
        if (r == Released::kIo)
            return make_error(Code::kIo, "cannot free an expired claim", store_.dir());
        if (r == Released::kDone) ++freed;
    }
    uint64_t expected = began;
    if (!shm::cas_word(
            idx.header().claim_due, expected,
            shm::ClaimDue{earliest, uint16_t(shm::ClaimDue::decode(began).changes + 1)}.encode())) {
        lower_due(earliest);
    }
    return freed;
}

Expected<size_t> Allocator::expire_claims() {
    if (store_.retired()) return retired_error();
    LeaseGuard lease(store_);
    if (auto st = lease.acquire(); !st) return st.error();
    reap_dead_leases(store_);
    return expire_claims_with(lease.handle());
}

Expected<std::vector<AllocatedAddress>> Allocator::sandbox_addresses(
    const EntryRef& sandbox, const std::string& container_id) {
    const auto claim = claim_of(sandbox.index, sandbox.word);
    if (claim && shm::load_word(store_.index().entry(claim->index).claim.binding) ==
                     ClaimBinding::bound(sandbox.index, EntryWord::decode(sandbox.word).gen)) {
        return describe(claim->index, claim->word);
    }
    return make_error(Code::kClaimMoved,
                      "container " + container_id +
                          " no longer holds its pod's fixed addresses (a newer sandbox of the pod "
                          "holds them, or the claim was released)");
}

ClaimView Allocator::view_claim(uint64_t entry_index, uint64_t entry_word) {
    const format::Entry& c = store_.index().entry(entry_index);
    ClaimView v;
    v.key = fixed(c.container_id, sizeof c.container_id);
    v.fp = AttachmentIndex::read_fp(c, entry_word).value_or(Fingerprint{});
    v.pod = pod_of(c);
    v.keep_idle = c.claim.keep_idle;
    v.created_unix_ns = c.created_unix_ns;
    for (size_t k = 0; k < std::min<size_t>(c.ref_count, format::kMaxRangeSets); ++k) {
        if (c.refs[k].family == 4 || c.refs[k].family == 6) {
            v.addresses.push_back(ref_address(c.refs[k]));
        }
    }
    const ClaimBinding b = ClaimBinding::decode(shm::load_word(c.claim.binding));
    switch (b.kind) {
        case ClaimBinding::Kind::kBound:
            if (sandbox_alive(b.entry, b.tenancy)) {
                v.use = ClaimView::Use::kInUse;
                const format::Entry& s = store_.index().entry(b.entry);
                v.container_id = fixed(s.container_id, sizeof s.container_id);
            } else {
                v.use = ClaimView::Use::kIdle;  // its sandbox ended; the next walk says since when
            }
            break;
        case ClaimBinding::Kind::kIdle:
            v.use = ClaimView::Use::kIdle;
            v.idle_since_unix_s = b.since_s;
            v.expires_unix_s = due_at(v.keep_idle, b.since_s);
            break;
        case ClaimBinding::Kind::kExpiring:
            v.use = ClaimView::Use::kExpiring;
            break;
        case ClaimBinding::Kind::kUnknownSandbox:
            v.use = ClaimView::Use::kUnknownSandbox;
            break;
    }
    return v;
}

std::vector<ClaimView> Allocator::claims() {
    std::vector<ClaimView> out;
    shm::IndexFile& idx = store_.index();
    for (uint64_t i = 0; i < idx.entry_count(); ++i) {
        const uint64_t w = shm::load_word(idx.entry(i).state);
        if (!committed_claim(idx.entry(i), w)) continue;
        ClaimView v = view_claim(i, w);
        if (shm::load_word(idx.entry(i).state) == w) out.push_back(std::move(v));
    }
    return out;
}

Expected<std::vector<ClaimView>> Allocator::release_claims(
    const std::function<bool(const ClaimView&)>& filter, bool in_use_too, bool dry_run) {
    std::vector<uint64_t> every(store_.index().entry_count());
    for (uint64_t i = 0; i < every.size(); ++i) every[i] = i;
    return release_claims_among(every, filter, in_use_too, dry_run);
}

Expected<size_t> Allocator::release_claim(const std::string& key, const std::string& ifname,
                                          bool in_use_too) {
    std::vector<uint64_t> found;
    for (const EntryRef& e : make_index(store_).find(fingerprint(key, ifname))) {
        found.push_back(e.index);
    }
    auto out = release_claims_among(
        found, [](const ClaimView&) { return true; }, in_use_too, false);
    if (!out) return out.error();
    return out->size();
}

Expected<std::vector<ClaimView>> Allocator::release_claims_among(
    const std::vector<uint64_t>& entries, const std::function<bool(const ClaimView&)>& filter,
    bool in_use_too, bool dry_run) {
    if (store_.retired()) return retired_error();
    LeaseGuard lease(store_);
    if (!dry_run) {
        if (auto st = lease.acquire(); !st) return st.error();
        reap_dead_leases(store_);
    }
    std::vector<ClaimView> out;
    shm::IndexFile& idx = store_.index();
    for (uint64_t i : entries) {
        const uint64_t w = shm::load_word(idx.entry(i).state);
        if (!committed_claim(idx.entry(i), w)) continue;
        const uint64_t seen = shm::load_word(idx.entry(i).claim.binding);
        ClaimView v = view_claim(i, w);
        if (!filter(v)) continue;
        // A sandbox unknown since a rebuild may be running: in use, as far as anyone knows.
        const bool in_use =
            v.use == ClaimView::Use::kInUse || v.use == ClaimView::Use::kUnknownSandbox;
        if (in_use && !in_use_too) continue;
        if (dry_run) {
            out.push_back(std::move(v));
            continue;
        }
        // Not forced: only as it was seen (a sandbox that bound it since keeps it).
        if (!in_use_too && !mark_expiring(i, w, seen)) continue;
        const Released r = release_entry(i, w, lease.handle());
        if (r == Released::kIo) {
            return make_error(Code::kIo,
                              "cannot complete a release: the journal cannot be written or a "
                              "block arena cannot be opened",
                              store_.dir());
        }
        if (r == Released::kDone) out.push_back(std::move(v));
    }
    return out;
}

}  // namespace shmipam::engine
