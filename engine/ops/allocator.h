// The operations over a network's store, one file each: add.cpp (ADD), release.cpp (DEL, GC and
// the operator's releases), check.cpp (CHECK and STATUS). No environment, no output (the plugin
// and shmipamctl do those).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/addr/fingerprint.h"
#include "engine/state/network_config.h"
#include "engine/state/network_store.h"

namespace shmipam::engine {

struct AddRequest {
    AttachmentKey key;
    std::vector<IpAddress> requested;  // at most one per range set
    PodRef pod;
    uint64_t network_tag = 0;  // pool mode: which network's ADD (format.h, Entry::network_tag)
    uint8_t flags = 0;         // recorded with the entry and its records: kEntryFlagClaim
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
    // kUnavailable when some range set could not serve an ADD.
    Status status();

    // Operator releases (shmipamctl). Each attachment is released with a CAS from the word it
    // was seen with, so one re-claimed meanwhile is never touched. Dry run: only report.
    Expected<std::vector<ReleasedAttachment>> release_where(const EntryFilter& filter,
                                                            bool dry_run);
    // The attachment holding `address` (all of its addresses), if it still holds it.
    Expected<std::vector<ReleasedAttachment>> release_address(const IpAddress& address,
                                                              bool dry_run);

  private:
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

    NetworkStore& store_;
    const NetworkConfig& cfg_;
};

}  // namespace shmipam::engine
