// The operations over a network's store, one file each: add.cpp (ADD), release.cpp (DEL, GC and
// the operator's releases), check.cpp (CHECK and STATUS). No environment, no output (the plugin
// and shmipamctl do those).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "engine/addr/fingerprint.h"
#include "engine/slots/attachment_index.h"
#include "engine/slots/entry_fields.h"
#include "engine/state/network_config.h"
#include "engine/state/network_store.h"

namespace shmipam::engine {

// A fixed address (docs/fixed-ips.md): the addresses are held by a claim keyed by a name, and
// the request's sandbox uses them while the claim is bound to it.
struct ClaimSpec {
    std::string key;                                // "sts:<ns>/<pod>/<ifname>" (pools/sticky.h)
    uint64_t keep_idle = format::kKeepIdleForever;  // format.h, ClaimFields::keep_idle
};

struct AddRequest {
    AttachmentKey key;                 // the sandbox's
    std::vector<IpAddress> requested;  // at most one per range set
    PodRef pod;
    uint64_t network_tag = 0;  // pool mode: which network's ADD (format.h, Entry::network_tag)
    std::optional<ClaimSpec> claim;
};

struct AllocatedAddress {
    IpAddress address;
    size_t range_set = 0;
    const Range* range = nullptr;  // the configured range holding it (prefix, gateway)
};

struct AddOutcome {
    std::vector<AllocatedAddress> addresses;  // one per range set, in range-set order
    bool existing = false;                    // the attachment already held them (a repeated ADD)
};

struct GcOutcome {
    size_t released = 0;
    size_t claims_expired = 0;
};

// A claim as tools show it (shmipamctl claims).
struct ClaimView {
    std::string key;  // "sts:<ns>/<pod>/<ifname>", truncated to the entry's field
    Fingerprint fp;   // of (key, ifname): what identifies the claim
    std::string pod;  // the pod that made it
    std::vector<IpAddress> addresses;
    enum class Use { kInUse, kIdle, kUnknownSandbox, kExpiring } use = Use::kIdle;
    std::string container_id;  // kInUse: the sandbox using it
    uint64_t idle_since_unix_s = 0;
    uint64_t keep_idle = format::kKeepIdleForever;
    // kIdle with a time limit: when the next invocation that meets it frees it (0: never).
    uint64_t expires_unix_s = 0;
    uint64_t created_unix_ns = 0;
};

// An attachment an operator's release (or GC) let go of, or would in a dry run.
struct ReleasedAttachment {
    std::string container_id;
    std::string ifname;
    std::string pod;
    std::vector<IpAddress> addresses;
};
using EntryFilter = std::function<bool(const format::Entry&, const Fingerprint&)>;

class Allocator {
  public:
    Allocator(NetworkStore& store, const NetworkConfig& cfg) : store_(store), cfg_(cfg) {}

    Expected<AddOutcome> add(const AddRequest& req);
    // Idempotent: an unknown attachment is not an error.
    Status del(const AttachmentKey& key);
    // The addresses the attachment holds (CHECK). kCheckNoAllocation when it holds none.
    Expected<std::vector<AllocatedAddress>> addresses_of(const AttachmentKey& key);
    // Releases every committed attachment not in `valid`; with `only_tag`, only those an ADD of
    // that network made (pool mode: a pool is shared by networks, and GC is per network).
    Expected<GcOutcome> gc(const std::vector<AttachmentKey>& valid,
                           std::optional<uint64_t> only_tag = std::nullopt);
    // kUnavailable when some range set could not serve an ADD. Frees expired claims first.
    Status status();

    // Fixed addresses (claims.cpp). Frees every claim whose policy says it has been idle long
    // enough, and completes releases of claims left expiring; how many.
    Expected<size_t> expire_claims();
    // Every claim of the network, read without a lease.
    std::vector<ClaimView> claims();
    // The operator's release of claims (shmipamctl release --claim): those the filter accepts.
    // A claim in use by a live sandbox (or one unknown since a rebuild) is released only with
    // `in_use_too`.
    Expected<std::vector<ClaimView>> release_claims(
        const std::function<bool(const ClaimView&)>& filter, bool in_use_too, bool dry_run);
    // The claim keyed (key, ifname), found by its fingerprint: released as release_claims does.
    // How many (0 or 1).
    Expected<size_t> release_claim(const std::string& key, const std::string& ifname,
                                   bool in_use_too);
    // An operator's claim made by hand (shmipamctl claims create/import; docs/operations.md):
    // the claim entry req.claim names (keyed by fingerprint(req.claim->key, req.key.ifname)),
    // holding req.requested (and a next-fit address of each range set none is requested for),
    // committed idle with no sandbox, exactly as an ADD that died after step b leaves it, so
    // that the name's next ADD binds it. Already there: its addresses, `existing` set, nothing
    // changed. An address held by anyone else fails as a requested address does.
    Expected<AddOutcome> create_idle_claim(const AddRequest& req);
    // The clock claims are judged by (unix seconds); tests replace it.
    void use_clock(std::function<uint64_t()> unix_s) { now_s_ = std::move(unix_s); }

    // Operator releases (shmipamctl). Each attachment is released with a CAS from the word it
    // was seen with, so one re-claimed meanwhile is never touched. Dry run: only report.
    Expected<std::vector<ReleasedAttachment>> release_where(const EntryFilter& filter,
                                                            bool dry_run);
    // The attachment holding `address` (all of its addresses), if it still holds it.
    Expected<std::vector<ReleasedAttachment>> release_address(const IpAddress& address,
                                                              bool dry_run);

    // Cluster mode's block release (docs/cluster.md, "Giving a block back"): runs `give_back`
    // while no ADD can take an address of the block at `base`. Every slot of the block is held
    // CLAIMING under this operation's lease meanwhile, and let go after (a process that dies
    // holding them is healed like any dead claim). Not run when a slot is in use, or still
    // cooling (then cooling_left_ms says for how long).
    struct BlockEmptiness {
        bool ran = false;
        bool in_use = false;
        uint64_t cooling_left_ms = 0;
    };
    Expected<BlockEmptiness> while_block_empty(const IpAddress& base,
                                               const std::function<Status()>& give_back);

  private:
    struct Added {
        AddOutcome outcome;
        uint64_t entry = 0;
        uint64_t word = 0;  // committed
    };
    // ADD steps 3 to 9 for one entry keyed by fp (the sandbox's, or a claim's).
    Expected<Added> add_entry(const Fingerprint& fp, const AttachmentText& text,
                              const AddRequest& req,
                              const std::vector<std::optional<IpAddress>>& requests,
                              const shm::LeaseHandle& lease, uint64_t claim_binding);
    Expected<AddOutcome> add_for_claim(const AddRequest& req,
                                       const std::vector<std::optional<IpAddress>>& requests,
                                       const shm::LeaseHandle& lease);
    // The claim a sandbox entry (kEntryFlagBinding) observed as sandbox_word names, if that
    // claim is still committed: its index and committed word.
    std::optional<EntryRef> claim_of(uint64_t sandbox_entry, uint64_t sandbox_word);
    // Whether the sandbox entry (index, tenancy) is alive (committed).
    bool sandbox_alive(uint64_t entry_index, uint16_t tenancy);
    // Binds the claim to the sandbox entry, unless a newer sandbox of the name holds it.
    enum class Bound { kDone, kNewerSandbox, kClaimGoing, kSandboxGone };
    Bound bind(const EntryRef& claim, uint64_t sandbox_entry, uint64_t sandbox_word);
    // A sandbox entry being released: unbinds the claim if bound to it; the claim to release
    // now when its policy frees it at DEL.
    std::optional<EntryRef> unbind(const EntryRef& claim, uint64_t sandbox_entry,
                                   uint64_t sandbox_word);
    // Marks a claim expiring (so that nobody binds it while it is released); with only_from,
    // only if its binding word is still that. False when the claim changed meanwhile.
    bool mark_expiring(uint64_t claim_index, uint64_t claim_word,
                       std::optional<uint64_t> only_from = std::nullopt);
    // Before a claim whose records are of an earlier boot is bound in this one: its records
    // again, with this boot's id (format.h, ClaimFields::records_of_earlier_boot).
    Status rejournal(const EntryRef& claim);
    // The addresses a sandbox entry uses: its claim's, while the claim is bound to it.
    Expected<std::vector<AllocatedAddress>> sandbox_addresses(const EntryRef& sandbox,
                                                              const std::string& container_id);
    void lower_due(uint64_t due_s);
    Expected<std::vector<ClaimView>> release_claims_among(
        const std::vector<uint64_t>& entries, const std::function<bool(const ClaimView&)>& filter,
        bool in_use_too, bool dry_run);
    Expected<size_t> expire_claims_with(const shm::LeaseHandle& lease);
    // Whether an idle claim may be due (the index header's claim_due has passed).
    bool claims_due();
    ClaimView view_claim(uint64_t entry_index, uint64_t entry_word);
    uint64_t now_s() const { return now_s_(); }

    // Whether a's slot is ALLOCATED to (entry_index, tenancy).
    bool slot_owned_by(const IpAddress& a, uint64_t entry_index, uint16_t tenancy);
    // The addresses of the entry, read consistently with its state being entry_word; 11 when a
    // slot it names is not its own.
    Expected<std::vector<AllocatedAddress>> describe(uint64_t entry_index, uint64_t entry_word);
    Expected<std::vector<std::optional<IpAddress>>> map_requests(
        const std::vector<IpAddress>& requested);
    // Releases a committed entry (DEL, GC): kChanged when it changed under us (look again),
    // kIo when a block could not be opened (the release stays RELEASING for a retry to finish).
    enum class Released { kDone, kChanged, kIo };
    Released release_entry(uint64_t entry_index, uint64_t word, const shm::LeaseHandle& lease);
    // The release itself (release_entry adds what claims and their sandboxes need).
    Released release_committed(uint64_t entry_index, uint64_t word, const shm::LeaseHandle& lease);

    NetworkStore& store_;
    const NetworkConfig& cfg_;
    std::function<uint64_t()> now_s_ = [] { return base::unix_ns() / 1'000'000'000; };
};

}  // namespace shmipam::engine
