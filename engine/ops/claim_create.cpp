// A fixed claim made by an operator rather than by a pod's ADD (shmipamctl claims create and
// claims import): the claim entry alone, idle. It is step b of a sticky ADD
// (claims.cpp, add_for_claim) without the sandbox: the state it leaves is the one an ADD
// killed at "claim.after_claim_commit" leaves, which every invocation already handles (the
// name's next ADD binds it; its policy frees it if the pod never comes).
#include "engine/ops/allocator.h"
#include "engine/ops/lease_guard.h"
#include "engine/recovery/recovery.h"
#include "shm/atomic_word.h"

namespace shmipam::engine {

namespace {

// Each retry follows a release of the same claim that another invocation was completing.
constexpr int kCreateAttempts = 4;

}  // namespace

Expected<AddOutcome> Allocator::create_idle_claim(const AddRequest& req) {
    if (!req.claim) return make_error(Code::kInvalidConfig, "no claim to create");
    auto requests = map_requests(req.requested);
    if (!requests) return requests.error();
    if (cfg_.range_sets.size() > format::kMaxRangeSets) {
        return make_error(Code::kInvalidConfig, "too many range sets");
    }
    LeaseGuard lease(store_);
    if (auto st = lease.acquire(); !st) return st.error();
    if (store_.retired()) return retired_error();
    reap_dead_leases(store_);
    if (claims_due()) (void)expire_claims_with(lease.handle());
    const ClaimSpec& spec = *req.claim;
    const Fingerprint claim_fp = fingerprint(spec.key, req.key.ifname);
    const std::string pod = req.pod.name.empty() ? "" : req.pod.namespace_ + "/" + req.pod.name;
    const AttachmentText text{spec.key, req.key.ifname, pod, format::kEntryFlagClaim,
                              0,        spec.keep_idle};
    for (int attempt = 0; attempt < kCreateAttempts; ++attempt) {
        // Due first, as an ADD does: a claim nobody ever binds is still met by its policy.
        lower_due(claim_due_at(spec.keep_idle, now_s()));
        auto claim = add_entry(claim_fp, text, req, *requests, lease.handle(),
                               shm::ClaimBinding::idle(now_s()));
        if (!claim) return claim.error();
        if (shm::load_word(store_.index().entry(claim->entry).claim.binding) ==
            shm::ClaimBinding::expiring()) {
            // Being released: complete that release, then make the claim anew.
            if (release_entry(claim->entry, claim->word, lease.handle()) == Released::kIo) {
                return make_error(Code::kIo, "cannot complete the release of claim " + spec.key,
                                  store_.dir());
            }
            continue;
        }
        return std::move(claim->outcome);
    }
    return make_error(Code::kTryAgainLater, "the claim " + spec.key + " kept changing: retry");
}

}  // namespace shmipam::engine
